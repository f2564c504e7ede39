"""The write transaction and the audit event it appends: the one way a row and its event are
written together. ``Store`` and its parts (``pins``, ``commits``) open transactions here."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from gatekeeper.canonical import canonical_json, now_ts
from gatekeeper.store.chain import GENESIS, event_hash
from gatekeeper.store.connections import WriterPool
from gatekeeper.store.version import check_schema

if TYPE_CHECKING:
    from gatekeeper.keys import KeyRing, Signer


@lru_cache(maxsize=64)
def _insert_sql(table: str, columns: tuple[str, ...]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"


@dataclass(frozen=True)
class Event:
    seq: int
    at: str
    kind: str
    actor: str
    proposal_id: str | None
    payload: str
    prev_hash: str
    hash: str


class Tx:
    """One BEGIN IMMEDIATE transaction on the pooled sqlite3 connection.

    Writes use plain DB-API calls: through SQLAlchemy Core a proposal cost ~0.4 ms more Python
    per transaction than its own fsync, which halved the durable rate (bench/), and loading it
    cost the proxy ~0.2 s at start. The tables are still the SQLModel ones, migrated by Alembic.
    """

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cur = cursor

    def first(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._cur.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        return self._cur.execute(sql, params).fetchall()

    def run(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> None:
        self._cur.execute(sql, params)

    def insert(self, table: str, row: dict[str, Any]) -> None:
        self._cur.execute(_insert_sql(table, tuple(row)), row)

    def append_event(
        self, kind: str, actor: str, payload: dict[str, Any] | None = None, proposal_id: str | None = None
    ) -> Event:
        """Chain an audit event onto the log inside this transaction: it commits with the rows, or not at all."""
        last = self.first("SELECT seq, hash FROM audit_event ORDER BY seq DESC LIMIT 1")
        seq, prev = (last[0] + 1, last[1]) if last else (1, GENESIS)
        at = now_ts()
        text = canonical_json(payload or {})
        digest = event_hash(prev, seq, at, kind, actor, proposal_id, text)
        row = dict(seq=seq, at=at, kind=kind, actor=actor, proposal_id=proposal_id, payload=text, prev_hash=prev)
        self.insert("audit_event", {**row, "hash": digest})
        return Event(seq, at, kind, actor, proposal_id, text, prev, digest)


class Transactions:
    """A Gatekeeper database opened for writing: opening checks the schema."""

    def __init__(self, db_path: Path, *, check: bool = True, keys_dir: Path | None = None) -> None:
        self.db_path = Path(db_path)
        # The Ed25519 keys (``gatekeeper.keys``): the home's keys/ folder beside the database by default.
        self.keys_dir = Path(keys_dir) if keys_dir is not None else self.db_path.parent / "keys"
        if check:
            check_schema(self.db_path)
        self.writer = WriterPool(self.db_path)

    def close(self) -> None:
        self.writer.dispose()

    def signer(self) -> Signer:
        """The review side's private key, read now (a rotation takes effect at once); refused where
        only public keys are kept. cryptography loads here, not when the proxy opens the store."""
        from gatekeeper.keys import Keys

        return Keys(self.keys_dir).signer()

    def keyring(self) -> KeyRing:
        from gatekeeper.keys import Keys

        return Keys(self.keys_dir).keyring()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on any exception)."""
        with self.writer.connection() as conn:
            cur = conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                yield Tx(cur)
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def append_event(
        self, kind: str, actor: str, payload: dict[str, Any] | None = None, proposal_id: str | None = None
    ) -> Event:
        """Record something that changed no other table: a refusal, a denied tool, ``init``."""
        with self.transaction() as tx:
            return tx.append_event(kind, actor, payload, proposal_id)

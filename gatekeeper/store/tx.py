"""The write transaction and the audit event it appends: the one way a row and its event are
written together. ``Store`` and its parts (``pins``, ``commits``) open transactions here."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

from gatekeeper.canonical import canonical_json, now_ts
from gatekeeper.store.backends import DatabaseUnreachable, Outage, backend_for, lost
from gatekeeper.store.chain import GENESIS, event_hash
from gatekeeper.store.connections import WriterPool
from gatekeeper.store.target import Database
from gatekeeper.store.version import check_schema

if TYPE_CHECKING:
    from gatekeeper.trust.keys import KeyRing, Signer

T = TypeVar("T")
RETRY_SECONDS = 120.0  # how long an idempotent write waits for a restarted or failed-over server


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
    """One writing transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: the chain's advisory lock).

    Writes use plain DB-API calls: through SQLAlchemy Core a proposal cost ~0.4 ms more Python
    per transaction than its own fsync, which halved the durable rate (bench/), and loading it
    cost the proxy ~0.2 s at start. The tables are still the SQLModel ones, migrated by Alembic.
    The SQL is SQLite's; ``translate`` (PostgreSQL only) rewrites it (``backends``).
    """

    def __init__(
        self,
        cursor: Any,
        translate: Callable[[str], str] | None = None,
        integrity_errors: tuple[type[BaseException], ...] = (sqlite3.IntegrityError,),
    ) -> None:
        self._cur = cursor
        self._sql = translate
        self.integrity_errors = integrity_errors  # what a UNIQUE index or a trigger raises

    def first(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._cur.execute(self._sql(sql) if self._sql else sql, params).fetchone()
        return row

    def all(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._cur.execute(self._sql(sql) if self._sql else sql, params).fetchall()
        return rows

    def run(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> None:
        self._cur.execute(self._sql(sql) if self._sql else sql, params)

    def insert(self, table: str, row: dict[str, Any]) -> None:
        sql = _insert_sql(table, tuple(row))
        self._cur.execute(self._sql(sql) if self._sql else sql, row)

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

    def __init__(self, db: Database, *, check: bool = True, keys_dir: Path | None = None) -> None:
        self.backend = backend_for(db)
        self.db_path = self.backend.database  # a Path for SQLite (the name older callers know)
        # The Ed25519 keys (``gatekeeper.trust.keys``): the home's keys/ folder beside a SQLite database by
        # default; a PostgreSQL store is told where the home keeps them.
        if keys_dir is None and isinstance(self.db_path, Path):
            keys_dir = self.db_path.parent / "keys"
        self.keys_dir = keys_dir
        if check:
            check_schema(self.db_path)
        self.writer = WriterPool(self.backend)
        self.outage: Outage | None = None  # told when a retried write loses the database, and when it is back

    def close(self) -> None:
        self.writer.dispose()

    def _keys(self) -> Path:
        if self.keys_dir is None:
            raise RuntimeError("this store was opened without the home's keys/ folder (keys_dir)")
        return self.keys_dir

    def signer(self) -> Signer:
        """The review side's private key, read now (a rotation takes effect at once); refused where
        only public keys are kept. cryptography loads here, not when the proxy opens the store."""
        from gatekeeper.trust.keys import Keys

        return Keys(self._keys()).signer()

    def keyring(self) -> KeyRing:
        from gatekeeper.trust.keys import Keys

        return Keys(self._keys()).keyring()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """BEGIN (with the write lock) ... COMMIT (ROLLBACK on any exception).

        A lost PostgreSQL connection surfaces as ``DatabaseUnreachable``, never as a driver error;
        a kept-open connection found dead at BEGIN (the server restarted while it sat idle) is
        replaced once, since nothing was sent yet, so the first write after a restart does not fail.
        """
        backend = self.backend
        for fresh in (False, True):
            conn = None
            try:
                with self.writer.connection() as conn:
                    cur = conn.cursor()
                    try:
                        backend.begin_write(cur)
                    except backend.lost_errors:
                        if fresh or backend.reusable(conn):
                            raise
                        continue  # the kept connection died while idle (a restart): nothing written; a new one
                    try:
                        yield Tx(cur, backend.translate, backend.integrity_errors)
                    except BaseException:
                        if backend.reusable(conn):
                            cur.execute("ROLLBACK")
                        raise
                    cur.execute("COMMIT")
                    return
            except backend.lost_errors as exc:
                if conn is not None and backend.reusable(conn):  # the server said no (a timeout, a conflict)
                    raise
                raise lost(self.db_path, exc) from exc  # the connection broke: the pool has closed it

    def retrying(self, work: Callable[[Tx], T], seconds: float = RETRY_SECONDS) -> T:
        """``work`` in one transaction; when the connection is lost, reconnect and run it again.

        For idempotent work only: a connection lost during COMMIT leaves unknown whether it
        committed, so the second run must find what the first wrote and not write it twice.
        ``outage`` (if set) hears the first loss and the return, not every try.
        SQLite never loses its connection: this is one plain transaction there.
        """
        give_up, pause = time.monotonic() + seconds, 0.05
        while True:
            try:
                with self.transaction() as tx:
                    done = work(tx)
                if self.outage is not None:
                    self.outage.back()
                return done
            except DatabaseUnreachable as exc:
                if time.monotonic() >= give_up:
                    raise
                if self.outage is not None:
                    self.outage.lost(exc)
            time.sleep(pause)  # back off while the server restarts; not a test's synchronisation
            pause = min(pause * 2, 1.0)

    def append_event(
        self, kind: str, actor: str, payload: dict[str, Any] | None = None, proposal_id: str | None = None
    ) -> Event:
        """Record something that changed no other table: a refusal, a denied tool, ``init``."""
        with self.transaction() as tx:
            return tx.append_event(kind, actor, payload, proposal_id)

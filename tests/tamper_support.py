"""A database writer without keys, as issue 24 item 14 has them: SQLite's file with every guard
trigger dropped (plain ``sqlite3``), or a PostgreSQL superuser session with
``session_replication_role = replica`` (no trigger fires). They may delete and rewrite rows and
renumber and rehash the audit chain, so that it verifies again on its own."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gatekeeper.store.chain import GENESIS, event_hash
from gatekeeper.store.target import Database, PostgresUrl
from tests import pg_support

Row = tuple[Any, ...]  # (seq, at, kind, actor, proposal_id, payload)


@contextmanager
def unguarded(db: Database) -> Iterator[Any]:
    """A plain connection to ``db`` with every guard off; committed when the block ends."""
    if isinstance(db, PostgresUrl):
        conn: Any = pg_support.RawPostgres(db)
        conn.execute("SET session_replication_role = replica")  # superuser: no trigger fires
    else:
        conn = sqlite3.connect(db)
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
            conn.execute(f"DROP TRIGGER {name}")
    try:
        yield conn
        conn.commit()
    finally:
        conn.close()


def cut_events(conn: Any, cut: Callable[[Row], bool]) -> int:
    """Delete the events ``cut`` picks, renumber and rehash every other: how many were cut."""
    rows = conn.execute("SELECT seq, at, kind, actor, proposal_id, payload FROM audit_event ORDER BY seq").fetchall()
    kept = [r for r in rows if not cut(tuple(r))]
    conn.execute("DELETE FROM audit_event")
    prev = GENESIS
    for seq, (_, at, kind, actor, proposal_id, payload) in enumerate(kept, start=1):
        digest = event_hash(prev, seq, at, kind, actor, proposal_id, payload)
        conn.execute(
            "INSERT INTO audit_event (seq, at, kind, actor, proposal_id, payload, prev_hash, hash) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (seq, at, kind, actor, proposal_id, payload, prev, digest),
        )
        prev = digest
    return len(rows) - len(kept)

"""SQLite connections with the settings every process that writes needs.

WAL lets readers run beside the one writer; ``synchronous=FULL`` makes each commit durable;
``BEGIN IMMEDIATE`` takes the write lock up front so a read-then-write transaction can never
fail with SQLITE_BUSY_SNAPSHOT (which ``busy_timeout`` does not retry). See the shared notes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event

from gatekeeper.store.version import BUSY_TIMEOUT_MS


def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA journal_mode = WAL")
    cur.execute("PRAGMA synchronous = FULL")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.close()


def make_engine(db_path: Path) -> Engine:
    """A writer's engine: every transaction SQLAlchemy opens (Alembic's included) is BEGIN IMMEDIATE.

    Reads go through ``queries.Reader`` (plain sqlite3, read-only), not through this engine.
    """
    # A pooled connection stays open: reconnecting per transaction re-ran the PRAGMAs and let the
    # last close checkpoint and delete the WAL, which cost ~1 ms and two fsyncs a write (bench/).
    engine = create_engine(f"sqlite:///{db_path}", pool_size=1, max_overflow=4)
    event.listen(engine, "connect", _on_connect)

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine

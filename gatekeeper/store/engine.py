"""SQLite connections with the settings every process needs, and the schema-version gate.

WAL lets readers run beside the one writer; ``synchronous=FULL`` makes each commit durable;
``BEGIN IMMEDIATE`` takes the write lock up front so a read-then-write transaction can never
fail with SQLITE_BUSY_SNAPSHOT (which ``busy_timeout`` does not retry). See the shared notes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.pool import NullPool

from gatekeeper.errors import GatekeeperError, HomeMissing, SchemaTooNew, SchemaTooOld

BUSY_TIMEOUT_MS = 10_000

# Every revision in migrations/versions, oldest first. tests/test_schema.py checks this list
# against the scripts, so a process can check the schema without importing Alembic.
KNOWN_REVISIONS: tuple[str, ...] = ("0001",)
HEAD_REVISION = KNOWN_REVISIONS[-1]


def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA journal_mode = WAL")
    cur.execute("PRAGMA synchronous = FULL")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.close()


def make_engine(db_path: Path, *, immediate: bool) -> Engine:
    """An engine whose transactions begin IMMEDIATE (writers) or DEFERRED (readers)."""
    engine = create_engine(f"sqlite:///{db_path}", poolclass=NullPool if immediate else None)
    event.listen(engine, "connect", _on_connect)
    begin_sql = "BEGIN IMMEDIATE" if immediate else "BEGIN"

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        conn.exec_driver_sql(begin_sql)

    return engine


def current_revision(db_path: Path) -> str | None:
    """The Alembic revision stamped in the database, or None for a blank one."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        has_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
        ).fetchone()
        if not has_table:
            return None
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        return row[0] if row else None
    except sqlite3.DatabaseError as exc:
        raise GatekeeperError(
            f"{db_path} is not a Gatekeeper database ({exc})",
            "point --home at the right folder, or move the file away and run `gatekeeper init`",
        ) from None
    finally:
        conn.close()


def check_schema(db_path: Path) -> str:
    """Refuse a database the code cannot safely use; return its revision."""
    if not db_path.is_file():
        raise HomeMissing(f"no database at {db_path}", "run `gatekeeper init` to create it")
    revision = current_revision(db_path)
    if revision is None:
        raise SchemaTooOld(f"{db_path} has no Gatekeeper schema yet", "run `gatekeeper db upgrade`")
    if revision not in KNOWN_REVISIONS:
        raise SchemaTooNew(
            f"{db_path} has schema revision {revision}, newer than this Gatekeeper knows "
            f"(latest known: {HEAD_REVISION})",
            "upgrade Gatekeeper itself; do not use this older version on that database",
        )
    if revision != HEAD_REVISION:
        raise SchemaTooOld(
            f"{db_path} has schema revision {revision}; this Gatekeeper needs {HEAD_REVISION}",
            "run `gatekeeper db upgrade`",
        )
    return revision

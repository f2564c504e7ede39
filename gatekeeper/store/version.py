"""The schema-version gate, in the standard library only: every process checks the database's
Alembic revision before use, and the read-only ``audit`` commands must not pay for SQLAlchemy.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gatekeeper.errors import GatekeeperError, HomeMissing, SchemaTooNew, SchemaTooOld
from gatekeeper.store.target import Database, PostgresUrl

BUSY_TIMEOUT_MS = 10_000

# Every revision in migrations/versions, oldest first. tests/test_schema.py checks this list
# against the scripts, so a process can check the schema without importing Alembic.
KNOWN_REVISIONS: tuple[str, ...] = tuple(f"{n:04d}" for n in range(1, 12))  # 0001 ... 0011
HEAD_REVISION = KNOWN_REVISIONS[-1]


def current_revision(db_path: Database) -> str | None:
    """The Alembic revision stamped in the database, or None for a blank one."""
    if isinstance(db_path, PostgresUrl):
        from gatekeeper.store.postgres import current_revision as postgres_revision

        return postgres_revision(db_path)
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


def check_schema(db_path: Database) -> str:
    """Refuse a database the code cannot safely use; return its revision."""
    if isinstance(db_path, Path) and not db_path.is_file():
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

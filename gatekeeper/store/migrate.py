"""Run the Alembic migrations in ``migrations/`` against a Gatekeeper database.

Imported only by ``gatekeeper init`` and ``gatekeeper db``: other processes check the
revision with ``engine.check_schema`` and never load Alembic.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gatekeeper.errors import SchemaTooNew
from gatekeeper.resources import migrations_dir
from gatekeeper.store.engine import make_engine
from gatekeeper.store.target import Database, PostgresUrl
from gatekeeper.store.version import current_revision

if TYPE_CHECKING:
    from alembic.config import Config


def _config(migrations: Path) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations))
    return cfg


@dataclass(frozen=True)
class SchemaStatus:
    current: str | None
    head: str
    pending: tuple[str, ...]

    @property
    def up_to_date(self) -> bool:
        return not self.pending


def status(db_path: Database, migrations: Path | None = None) -> SchemaStatus:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(_config(migrations or migrations_dir()))
    head = script.get_current_head()
    assert head is not None
    current = current_revision(db_path) if not isinstance(db_path, Path) or db_path.exists() else None
    known = [rev.revision for rev in script.walk_revisions()]  # newest first
    if current is not None and current not in known:
        raise SchemaTooNew(
            f"{db_path} has schema revision {current}, which this Gatekeeper does not know",
            "upgrade Gatekeeper itself; do not use this older version on that database",
        )
    pending = []
    for rev in known:
        if rev == current:
            break
        pending.append(rev)
    return SchemaStatus(current=current, head=head, pending=tuple(reversed(pending)))


def upgrade(db_path: Database, migrations: Path | None = None) -> SchemaStatus:
    """Apply every pending revision, each in its own IMMEDIATE transaction with its version row."""
    from alembic import command

    migrations = migrations or migrations_dir()
    with _one_upgrade_at_a_time(db_path):
        before = status(db_path, migrations)
        if before.up_to_date:
            return before
        cfg = _config(migrations)
        engine = make_engine(db_path)
        try:
            with engine.connect() as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        finally:
            engine.dispose()
    return before


def max_decision_id(db: Database) -> int:
    """The highest decision id so far (0: none): where HMAC-signed decisions end (``gatekeeper.trust.keys``)."""
    sql = "SELECT coalesce(max(id), 0) FROM decision"
    if isinstance(db, PostgresUrl):
        from gatekeeper.store.postgres import PostgresBackend

        with PostgresBackend(db).connect(read_only=True) as pg:
            row = pg.execute(sql).fetchone()
            return int(row[0]) if row else 0
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


@contextmanager
def _one_upgrade_at_a_time(db: Database) -> Iterator[None]:
    """PostgreSQL: machines starting together upgrade one after the other, each reading the status
    under a session advisory lock on a connection of its own (closing it releases the lock). Without
    it two ``init`` runs on a blank database deadlocked. SQLite: a no-op, as before."""
    if not isinstance(db, PostgresUrl):
        yield
        return
    from gatekeeper.store.postgres import MIGRATION_LOCK, PostgresBackend

    with PostgresBackend(db).connect() as conn:
        conn.execute(f"SELECT pg_advisory_lock({MIGRATION_LOCK})")
        yield

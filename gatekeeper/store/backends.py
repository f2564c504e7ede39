"""The one place where SQLite and PostgreSQL differ for the store's plain DB-API code.

The domain SQL (``store``, ``commits``, ``decisions``, ``queries``…) is written once, in SQLite's
dialect with ``?`` and ``:name`` placeholders. A backend says how to connect, how a writing
transaction takes the write lock, how to translate that SQL (identity on SQLite), which errors mean
"a UNIQUE index or a trigger said no" and which mean "the connection is gone", and how a reader
takes a snapshot and notices another writer's commit.

``SqliteBackend`` is here and costs nothing new: the same connections, PRAGMAs and ``BEGIN
IMMEDIATE`` as before, and psycopg is never imported. ``postgres.PostgresBackend`` is loaded only
for a ``postgresql+psycopg://`` database (``backend_for``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from gatekeeper.errors import GatekeeperError
from gatekeeper.store.connections import configure
from gatekeeper.store.target import Database, PostgresUrl
from gatekeeper.store.version import BUSY_TIMEOUT_MS

LOST_HINT = "check that the database server runs and that database_url (GATEKEEPER_DATABASE_URL) names it right"


class DatabaseUnreachable(GatekeeperError):
    """The database server did not answer or hung up (down, restarting, failed over, a wrong address).

    Idempotent writes (``Transactions.retrying``) reconnect and try again; others report this."""


class Outage:
    """Says once that the database went away and once that it answers again, however many tries lie
    between: ``up``'s event feed and a committer's retried writes (``Transactions.retrying``) speak
    these same two lines. ``meanwhile`` says what happens until it is back."""

    def __init__(self, say: Callable[[str], None], meanwhile: str) -> None:
        self.say, self.meanwhile, self.down = say, meanwhile, False

    def lost(self, exc: DatabaseUnreachable) -> None:
        if not self.down:
            self.say(f"lost the database: {exc}; {self.meanwhile}")
        self.down = True

    def back(self) -> None:
        if self.down:
            self.say("the database answers again")
        self.down = False


def lost(db: Database, exc: BaseException) -> DatabaseUnreachable:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return DatabaseUnreachable(f"lost the connection to {db}: {first}", LOST_HINT)


class Backend(Protocol):
    """What the store needs to know about its database engine."""

    @property
    def name(self) -> str: ...

    @property
    def database(self) -> Database: ...

    @property
    def translate(self) -> Callable[[str], str] | None:
        """None: the SQL runs as written."""

    @property
    def integrity_errors(self) -> tuple[type[BaseException], ...]:
        """What a UNIQUE index, a CHECK or a trigger raises when it refuses."""

    @property
    def lost_errors(self) -> tuple[type[BaseException], ...]:
        """What a connection that hung up raises (``transaction`` turns it into ``DatabaseUnreachable``)."""

    @property
    def snapshot_begin(self) -> str:
        """A reader's BEGIN for several reads from one snapshot."""

    @property
    def data_version_sql(self) -> str:
        """One cheap read whose value moves when another connection commits."""

    def connect_writer(self) -> Any: ...

    def connect_reader(self) -> Any: ...

    def begin_write(self, cursor: Any) -> None: ...

    def in_transaction(self, conn: Any) -> bool: ...

    def reusable(self, conn: Any) -> bool: ...


class SqliteBackend:
    """The embedded default: WAL, ``synchronous=FULL``, one writer at a time via ``BEGIN IMMEDIATE``."""

    name = "sqlite"
    translate: Callable[[str], str] | None = None
    integrity_errors: tuple[type[BaseException], ...] = (sqlite3.IntegrityError,)
    lost_errors: tuple[type[BaseException], ...] = ()  # a file does not hang up
    snapshot_begin = "BEGIN"
    data_version_sql = "PRAGMA data_version"

    def __init__(self, db_path: Path) -> None:
        self.database: Path = Path(db_path)

    def connect_writer(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.database, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        configure(conn)
        return conn

    def connect_reader(self) -> sqlite3.Connection:
        """Read-only (``mode=ro``): ``audit`` can never write, even by mistake."""
        conn = sqlite3.connect(
            f"file:{self.database}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
        )
        conn.isolation_level = None  # autocommit; snapshots are taken with explicit BEGIN
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return conn

    def begin_write(self, cursor: sqlite3.Cursor) -> None:
        cursor.execute("BEGIN IMMEDIATE")

    def in_transaction(self, conn: sqlite3.Connection) -> bool:
        return conn.in_transaction

    def reusable(self, conn: sqlite3.Connection) -> bool:
        return True


def backend_for(db: Database | str) -> Backend:
    """The backend of ``db``: PostgreSQL for a ``PostgresUrl`` (loads psycopg), else SQLite."""
    if isinstance(db, PostgresUrl):
        try:
            from gatekeeper.store.postgres import PostgresBackend
        except ImportError as exc:
            raise GatekeeperError(
                f"database_url names PostgreSQL ({db}), but psycopg is not installed ({exc})",
                "install Gatekeeper with its team extra: pip install 'gatekeeper-mcp[team]'",
            ) from None
        return PostgresBackend(db)
    return SqliteBackend(Path(db))

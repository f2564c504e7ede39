"""The writer's connections: SQLite's settings here, a pool that keeps one open for either backend.

WAL lets readers run beside the one writer; ``synchronous=FULL`` makes each commit durable;
``BEGIN IMMEDIATE`` takes the write lock up front so a read-then-write transaction can never
fail with SQLITE_BUSY_SNAPSHOT (which ``busy_timeout`` does not retry). See the shared notes.

Plain ``sqlite3`` on purpose: the proxy writes through this and must start without loading
SQLAlchemy (~0.2 s of imports); only Alembic's migrations go through ``engine.make_engine``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from gatekeeper.store.version import BUSY_TIMEOUT_MS

if TYPE_CHECKING:
    from gatekeeper.store.backends import Backend


def configure(conn: sqlite3.Connection) -> None:
    """The PRAGMAs of a writing connection; autocommit mode, since we issue BEGIN ourselves."""
    conn.isolation_level = None
    cur = conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA journal_mode = WAL")
    cur.execute("PRAGMA synchronous = FULL")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.close()


class WriterPool:
    """Keeps one connection open between transactions; a concurrent user gets its own, closed after.

    A kept-open connection matters: reconnecting per transaction re-ran the PRAGMAs and let the
    last close checkpoint and delete the WAL, which cost ~1 ms and two fsyncs a write (bench/).
    Thread-safe: the review page's routes run in a thread pool. A PostgreSQL connection that broke
    (the server restarted) is closed, never kept: the next user opens a new one.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._idle: Any = None
        self._lock = threading.Lock()

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A configured connection, outside any transaction, for the length of the block."""
        with self._lock:
            conn, self._idle = self._idle, None
        conn = conn or self.backend.connect_writer()
        try:
            yield conn
        finally:
            if not self.backend.reusable(conn):
                conn.close()
                conn = None
            elif self.backend.in_transaction(conn):  # a failed COMMIT: never hand a connection on mid-transaction
                conn.execute("ROLLBACK")
            with self._lock:
                if self._idle is None:
                    conn, self._idle = None, conn
            if conn is not None:
                conn.close()

    def dispose(self) -> None:
        """Close the kept-open connection (one in use is closed when its user is done)."""
        with self._lock:
            conn, self._idle = self._idle, None
        if conn is not None:
            conn.close()

"""The writer's sqlite3 connections, with the settings every process that writes needs.

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
from pathlib import Path

from gatekeeper.store.version import BUSY_TIMEOUT_MS


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
    Thread-safe: the review page's routes run in a thread pool.
    """

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self._idle: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        configure(conn)
        return conn

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A configured connection, outside any transaction, for the length of the block."""
        with self._lock:
            conn, self._idle = self._idle, None
        conn = conn or self._open()
        try:
            yield conn
        finally:
            if conn.in_transaction:  # a failed COMMIT: never hand a connection on mid-transaction
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

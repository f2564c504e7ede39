"""The change signal on PostgreSQL: LISTEN instead of polling.

Every writing transaction queues ``NOTIFY gatekeeper_change`` (``postgres.PostgresBackend.begin_write``),
which PostgreSQL delivers at COMMIT, and never for a ROLLBACK. A ``Listener`` holds one connection
that LISTENs; asking it "anything since the last look?" reads what already arrived on its socket,
without a round trip. If that connection is lost (a restart, a failover) it says so, and
``follow.Changes`` polls ``max(seq)`` until a new listener is up. Loaded only for a PostgreSQL store.
"""

from __future__ import annotations

import weakref
from typing import Any

import psycopg

from gatekeeper.store.backends import DatabaseUnreachable
from gatekeeper.store.postgres import CHANGE_CHANNEL, PostgresBackend
from gatekeeper.store.target import PostgresUrl


class Listener:
    """One LISTEN connection; closed by ``close`` or, at the latest, when the listener is collected."""

    def __init__(self, database: PostgresUrl) -> None:
        self._conn: Any = PostgresBackend(database).connect()
        self._conn.execute(f"LISTEN {CHANGE_CHANNEL}")
        self._closer = weakref.finalize(self, self._conn.close)

    def heard(self) -> bool | None:
        """True: a transaction committed since the last call; False: none did; None: the connection
        is lost, so nothing can be told (the caller falls back to polling)."""
        try:
            return sum(1 for _ in self._conn.notifies(timeout=0)) > 0  # drained: none left for next time
        except psycopg.Error:
            self.close()
            return None

    def close(self) -> None:
        self._closer()


def listener(database: PostgresUrl) -> Listener | None:
    """A listener, or None while the server does not answer (the caller polls meanwhile)."""
    try:
        return Listener(database)
    except (DatabaseUnreachable, psycopg.Error):
        return None

"""Waking on change: SQLite has no notifications, but ``PRAGMA data_version`` on one read
connection changes exactly when another connection commits. Checking it is one cheap read, so a
waiter polls it and re-queries only when it moved (plus, as a fallback, every ``fallback``
seconds, so a missed change costs latency, never an event). On PostgreSQL the signal is a
LISTEN connection (``store.listen``): a look reads what already arrived, no query; while that
connection is lost, ``max(seq)`` is polled instead and a new listener is tried every few seconds.

``Changes`` is that signal (the committer's ``--watch`` and the proxy's waiting calls use it);
``Follower`` turns it into the new audit events after a seq (``audit log --follow``, ``up``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gatekeeper.store.chain import EventRow
from gatekeeper.store.queries import Reader
from gatekeeper.store.target import PostgresUrl

if TYPE_CHECKING:  # psycopg loads only for a PostgreSQL store
    from gatekeeper.store.listen import Listener

POLL_SECONDS = 0.1
FALLBACK_SECONDS = 5.0
RELISTEN_SECONDS = 2.0  # how often a lost LISTEN connection is tried again


class Changes:
    """Has the database changed since the last look? The first look always says yes."""

    def __init__(self, reader: Reader, fallback: float | None = FALLBACK_SECONDS) -> None:
        self.reader = reader
        self.fallback = fallback
        self._seen: int | None = None
        self._looked = 0.0
        self._first = True
        self._postgres = isinstance(reader.db_path, PostgresUrl)
        self._listener: Listener | None = None
        self._listen_tried = -RELISTEN_SECONDS
        self._listen()

    def changed(self) -> bool:
        """True when another connection committed since the last call (or the fallback interval passed)."""
        now = time.monotonic()
        due = self.fallback is not None and now - self._looked >= self.fallback
        moved = self._heard()
        if moved is None:  # nobody listening: poll
            version = self.reader.data_version()
            moved, self._seen = version != self._seen, version
        if not (moved or due or self._first):
            return False
        self._first, self._looked = False, now
        return True

    def close(self) -> None:
        """Close the LISTEN connection now (else it closes when this object is collected)."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def _heard(self) -> bool | None:
        """What the LISTEN connection heard since the last look (True right after (re)listening too:
        anything may have happened before); None without one (SQLite, or lost: poll meanwhile)."""
        if self._listener is not None:
            heard = self._listener.heard()
            if heard is not None:
                return heard
            self._listener = None
        return True if self._listen() else None

    def _listen(self) -> bool:
        """Start listening (PostgreSQL only, at most every ``RELISTEN_SECONDS``); True when it did."""
        now = time.monotonic()
        if not self._postgres or now - self._listen_tried < RELISTEN_SECONDS:
            return False
        self._listen_tried = now
        from gatekeeper.store.listen import listener

        assert isinstance(self.reader.db_path, PostgresUrl)
        self._listener = listener(self.reader.db_path)
        return self._listener is not None


class Follower:
    """The audit events appended after a seq, optionally filtered like ``Reader.events``."""

    def __init__(
        self,
        reader: Reader,
        after: int | None = None,
        *,
        kind: str | None = None,
        proposal_id: str | None = None,
        since: str | None = None,
        fallback: float | None = FALLBACK_SECONDS,
    ) -> None:
        """``after=None`` starts at the current head: only events appended from now on."""
        self.reader = reader
        self.after = reader.head()[0] if after is None else after
        self.kind, self.proposal_id, self.since = kind, proposal_id, since
        self.changes = Changes(reader, fallback)

    def poll(self) -> list[EventRow]:
        """New events since the last call; nothing (and no query) when the database did not change."""
        if not self.changes.changed():
            return []
        rows = self.reader.events(kind=self.kind, proposal_id=self.proposal_id, since=self.since, after_seq=self.after)
        if rows:
            self.after = rows[-1][0]
        return rows

    def close(self) -> None:
        self.changes.close()

    def follow(self, stop: threading.Event | None = None, poll: float = POLL_SECONDS) -> Iterator[list[EventRow]]:
        """Each non-empty batch of new events as it arrives, until ``stop`` is set (or forever)."""
        stop = stop or threading.Event()
        while not stop.is_set():
            rows = self.poll()
            if rows:
                yield rows
            stop.wait(poll)

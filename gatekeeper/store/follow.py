"""Waking on change: SQLite has no notifications, but ``PRAGMA data_version`` on one read
connection changes exactly when another connection commits. Checking it is one cheap read, so a
waiter polls it and re-queries only when it moved (plus, as a fallback, every ``fallback``
seconds, so a missed change costs latency, never an event).

``Changes`` is that signal (the committer's ``--watch`` and the proxy's waiting calls use it);
``Follower`` turns it into the new audit events after a seq (``audit log --follow``, ``up``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from gatekeeper.store.chain import EventRow
from gatekeeper.store.queries import Reader

POLL_SECONDS = 0.1
FALLBACK_SECONDS = 5.0


class Changes:
    """Has the database changed since the last look? The first look always says yes."""

    def __init__(self, reader: Reader, fallback: float | None = FALLBACK_SECONDS) -> None:
        self.reader = reader
        self.fallback = fallback
        self._seen: int | None = None
        self._looked = 0.0

    def changed(self) -> bool:
        """True when another connection committed since the last call (or the fallback interval passed)."""
        version = self.reader.data_version()
        now = time.monotonic()
        due = self.fallback is not None and now - self._looked >= self.fallback
        if version == self._seen and not due:
            return False
        self._seen, self._looked = version, now
        return True


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

    def follow(self, stop: threading.Event | None = None, poll: float = POLL_SECONDS) -> Iterator[list[EventRow]]:
        """Each non-empty batch of new events as it arrives, until ``stop`` is set (or forever)."""
        stop = stop or threading.Event()
        while not stop.is_set():
            rows = self.poll()
            if rows:
                yield rows
            stop.wait(poll)

"""``commit --watch``: stay up and commit each approval within a tick, without busy polling.

The store's change signal (``store.follow.Changes``, ``PRAGMA data_version``) moves only when
another connection commits, so checking it every 50 ms is one cheap read, and a pass runs only
when something changed (or, once a second, while a previous pass left work for later). SIGINT and SIGTERM end the loop
between batches; the exit is clean either way, and a kill -9 is safe too (the next start
finishes what was interrupted).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

from gatekeeper.commit.committer import Committer
from gatekeeper.commit.run import database_errors
from gatekeeper.errors import GatekeeperError
from gatekeeper.store.backends import DatabaseUnreachable
from gatekeeper.store.follow import Changes
from gatekeeper.store.queries import Reader

POLL_SECONDS = 0.05
RETRY_SECONDS = 1.0


def stop_on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def watch(
    committer: Committer,
    reader: Reader,
    stop: threading.Event,
    log: Callable[[str], None],
    *,
    poll: float = POLL_SECONDS,
    retry: float = RETRY_SECONDS,
) -> None:
    changes = Changes(reader, fallback=None)  # a pass with nothing new to do is not worth a timer
    errors: tuple[type[BaseException], ...] = (GatekeeperError, OSError, *database_errors(committer.store.db_path))
    retry_at: float | None = None
    said: set[str] = set()
    failing: object = None  # what the last pass failed with: said once while it lasts, not every retry
    while not stop.is_set():
        now = time.monotonic()
        try:  # a lost PostgreSQL connection (DatabaseUnreachable) lands here: retry, reconnecting
            due = retry_at is not None and now >= retry_at
            if changes.changed() or due:
                retry_at = None
                report = committer.run_pass()
                if failing is not None:
                    log("the pass worked again; carrying on")
                    failing, said = None, set()
                for message in report.waiting:
                    if message not in said:
                        log(message)
                said = set(report.waiting)
                if report.stopped or report.unfinished or report.elsewhere - report.finished:
                    retry_at = now + retry  # another committer's claims: see that they get their outcome
        except errors as exc:
            # A server that is down fails in several words (lost, cannot connect): one message for all.
            key = DatabaseUnreachable if isinstance(exc, DatabaseUnreachable) else str(exc)
            if key != failing:
                log(f"pass failed: {exc}; trying again every {retry:g} s")
            failing = key
            retry_at = now + retry
        stop.wait(poll)

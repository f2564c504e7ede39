"""The footer's answer to "does `audit verify` pass?", kept current without re-reading a
million events on every page: a full check at start and every few minutes in a thread, and an
incremental check of the new tail on each page view. A database server that went away (team
mode) leaves the last answer standing and the full check is tried again soon; it never stops."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from gatekeeper.audit.verify import verify_chain
from gatekeeper.store.backends import DatabaseUnreachable
from gatekeeper.store.chain import GENESIS, verify_rows
from gatekeeper.store.queries import Reader
from gatekeeper.store.target import Database

FULL_EVERY = 300.0
RETRY_EVERY = 5.0  # after a full check the database server did not answer


@dataclass(frozen=True)
class Integrity:
    state: str  # "ok", "failed", "checking"
    count: int = 0
    detail: str = ""


class ChainWatch:
    def __init__(self, database: Database) -> None:
        self.database = database
        self._lock = threading.Lock()
        self._result = Integrity("checking")
        self._verified = (0, GENESIS)  # (seq, hash) known good
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="chain-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.full()
            except DatabaseUnreachable:
                self._stop.wait(RETRY_EVERY)
                continue
            self._stop.wait(FULL_EVERY)

    def full(self) -> Integrity:
        with Reader(self.database) as reader:
            report = verify_chain(reader)
        with self._lock:
            if report.ok:
                self._verified = (report.head_seq, report.head_hash)
                self._result = Integrity("ok", report.count)
            else:
                assert report.problem is not None
                self._result = Integrity("failed", report.count, f"seq {report.problem.seq}: {report.problem.reason}")
        return self._result

    def current(self) -> Integrity:
        """Check only events appended since the last good head (the chain links them to it)."""
        with self._lock:
            result, (seq, head) = self._result, self._verified
        if result.state != "ok":
            return result
        try:
            with Reader(self.database) as reader:
                rows = reader.events(after_seq=seq)
        except DatabaseUnreachable:  # the page says so where it reads; the footer keeps its last answer
            return result
        if not rows:
            return result
        report = verify_rows(rows, seq, head)
        with self._lock:
            if report.problem is None:
                self._verified = (report.head_seq, report.head_hash)
                self._result = Integrity("ok", result.count + report.count)
            else:
                self._result = Integrity("failed", result.count, f"seq {report.problem.seq}: {report.problem.reason}")
            return self._result

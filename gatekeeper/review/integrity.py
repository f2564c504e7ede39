"""The footer's answer to "does `audit verify` pass?", kept current without re-reading a
million events on every page: a full check at start and every few minutes in a thread, and an
incremental check of the new tail on each page view."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from gatekeeper.audit.verify import verify_chain
from gatekeeper.store.chain import GENESIS, verify_rows
from gatekeeper.store.queries import Reader

FULL_EVERY = 300.0


@dataclass(frozen=True)
class Integrity:
    state: str  # "ok", "failed", "checking"
    count: int = 0
    detail: str = ""


class ChainWatch:
    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
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
            self.full()
            self._stop.wait(FULL_EVERY)

    def full(self) -> Integrity:
        with Reader(self.db_path) as reader:
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
        with Reader(self.db_path) as reader:
            rows = reader.events(after_seq=seq)
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

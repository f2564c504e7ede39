"""The footer's answer to "does `audit verify` pass?", kept current without re-reading a
million events on every page: a full check at start and every few minutes in a thread, and an
incremental check of the new tail on each page view."""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from gatekeeper.audit.verify import verify_chain
from gatekeeper.store.chain import GENESIS, event_message
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
        self._last_full = 0.0
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
            self._last_full = time.monotonic()
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
            rows = reader.conn.execute(
                "SELECT seq, at, kind, actor, proposal_id, payload, prev_hash, hash FROM audit_event "
                "WHERE seq > ? ORDER BY seq",
                (seq,),
            ).fetchall()
        if not rows:
            return result
        report = _verify_tail(rows, seq, head)
        with self._lock:
            if report is None:
                self._verified = (rows[-1][0], rows[-1][7])
                self._result = Integrity("ok", result.count + len(rows))
            else:
                self._result = Integrity("failed", result.count, report)
            return self._result


def _verify_tail(rows: list[tuple], seq: int, head: str) -> str | None:
    prev, expected = head, seq + 1
    for s, at, kind, actor, pid, payload, prev_hash, digest in rows:
        if s != expected or prev_hash != prev:
            return f"seq {expected}: the chain does not continue from the last verified event"
        h = hashlib.sha256(prev.encode("ascii"))
        h.update(event_message(s, at, kind, actor, pid, payload))
        if h.hexdigest() != digest:
            return f"seq {s}: hash does not match the row's contents"
        prev, expected = digest, s + 1
    return None

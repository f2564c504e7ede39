"""Which processes a test started are still alive, read from /proc (Linux), and what one prints."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from pathlib import Path


def alive(pid: int) -> bool:
    """Running or sleeping; a zombie (exited, not yet reaped) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def started(pid_dir: Path) -> dict[int, int]:
    """Servers that wrote ``<pid_dir>/<pid>`` (holding their parent's pid): {server pid: parent pid}."""
    return {int(f.name): int(f.read_text()) for f in pid_dir.iterdir() if f.name.isdigit()}


def wait_for_count(pid_dir: Path, count: int, timeout: float = 30) -> dict[int, int]:
    deadline = time.monotonic() + timeout
    while len(found := started(pid_dir)) < count:
        assert time.monotonic() < deadline, f"only {len(found)} of {count} servers started: {found}"
        time.sleep(0.02)
    return found


def wait_gone(pids: set[int], timeout: float) -> float:
    """Poll until none of ``pids`` is alive; return how long it took, fail with the survivors."""
    start = time.monotonic()
    while survivors := {pid for pid in pids if alive(pid)}:
        assert time.monotonic() - start < timeout, f"still alive after {timeout} s: {sorted(survivors)}"
        time.sleep(0.02)
    return time.monotonic() - start


class Lines:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.q: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        with proc.stdout:  # closed by its reader at end of file, like helpers.line_queue
            for line in proc.stdout:
                self.q.put(line.rstrip())

    def wait_for(self, pattern: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.q.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matching {pattern!r}; saw:\n" + "\n".join(self.seen))

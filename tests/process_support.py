"""Which processes a test started are still alive, read from /proc (Linux), and what one prints; a
command run in a process group of its own, its deadline following its progress, the group ended after."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import NamedTuple

from tests.helpers import patience


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
    deadline = time.monotonic() + patience(timeout)
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
        deadline = time.monotonic() + patience(timeout)
        while time.monotonic() < deadline:
            try:
                line = self.q.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matching {pattern!r}; saw:\n" + "\n".join(self.seen))


class Finished(NamedTuple):
    """How a command ``run_in_group`` ran ended, and what it printed."""

    returncode: int
    stdout: str
    stderr: str


def run_in_group(argv: list[str], logs: Path, *, stall: float, cap: float, cwd: Path | None = None) -> Finished:
    """Run ``argv`` to its end as the leader of a process group of its own, its output in files under
    ``logs``, and return what it printed. The deadline follows the work: it fails only when the command
    printed nothing for ``stall`` s (it stopped making progress), or after ``cap`` s (the last resort).
    However it ends (its exit, a failure here, the test's own timeout raising in the test), the whole
    group is killed: a server it started and could not stop (it was killed itself) must not outlive the test."""
    logs.mkdir(parents=True, exist_ok=True)
    out_path, err_path = logs / "stdout", logs / "stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd, start_new_session=True
        )
    try:
        started = last = time.monotonic()
        size = 0
        while process.poll() is None:
            now = time.monotonic()
            if (grown := out_path.stat().st_size + err_path.stat().st_size) != size:
                size, last = grown, now
            why = f"printed nothing for {stall:g} s" if now - last > stall else None
            why = why or (f"still running after {cap:g} s (the last resort)" if now - started > cap else None)
            if why:
                tail = err_path.read_text(errors="replace")[-3000:]
                raise AssertionError(f"{' '.join(argv[:3])} … {why}; the last of its stderr:\n{tail}")
            time.sleep(0.2)
        return Finished(process.returncode, out_path.read_text(errors="replace"), err_path.read_text(errors="replace"))
    finally:
        end_group(process)


def stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it is still running after ``grace`` s (a loaded machine's graceful
    shutdown can be slow, and a server left running would outlive its test), and reap it."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def end_group(process: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """SIGTERM the process group ``process`` leads, SIGKILL what is left after ``grace`` s, reap the leader.
    The group outlives its leader while any member lives, so this ends orphans too."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while _group_alive(process) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not _group_alive(process):
            break
    process.wait()


def _group_alive(process: subprocess.Popen[bytes]) -> bool:
    """Any member of the group (the leader's pid is its id) still running; the leader is reaped here."""
    process.poll()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == process.pid:  # state, ppid, pgrp
            return True
    return False

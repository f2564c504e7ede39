"""What the `gatekeeper up` tests share: how long a start may take here and now, which processes
still run on a home (`up` and its children name it on their command lines), and a clean stop."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.process_support import Lines
from tests.review_support import REPO


def start_allowance(floor: float = 15.0) -> float:
    """How long `up` may take to start or give up: 10 times what `gatekeeper --version` takes at
    this moment, so a loaded machine gets longer; never less than ``floor`` seconds."""
    began = time.monotonic()
    subprocess.run([sys.executable, "-m", "gatekeeper", "--version"], capture_output=True, check=True, cwd=REPO)
    return max(floor, 10 * (time.monotonic() - began))


def running_on(home: Path) -> list[int]:
    """Live processes (zombies aside) whose command line names ``home``: `up` and its children."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(home).encode() in argv and state != "Z":
            found.append(int(proc.name))
    return found


def lines_for(seconds: float, lines: Lines) -> list[str]:
    """Every line the process prints within ``seconds`` (kept in ``lines.seen`` too)."""
    got, deadline = [], time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            got.append(lines.q.get(timeout=min(left, 0.2)))
        except queue.Empty:
            continue
    lines.seen += got
    return got


def children_of(pid: int) -> list[int]:
    """The live children of ``pid`` (`up`'s two)."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def stop(proc: subprocess.Popen[str]) -> None:
    """Stop `up` the way that also stops its children (SIGINT), killing it only if that fails."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

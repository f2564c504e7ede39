"""tests/process_support.py's ``run_in_group``: its deadline follows the command's output, and nothing the
command started outlives it, even a server the command could not stop because it was killed first (the
bench's ``gatekeeper review`` that ran on for 40 minutes after ``subprocess.run(timeout=300)`` killed the
bench alone)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.helpers import wait_until
from tests.process_support import alive, run_in_group

SERVER = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)"
"""A stand-in for the review server a bench starts: writes its pid, then serves (sleeps) for 10 minutes."""


def bench(pid_file: Path, then: str) -> list[str]:
    """A stand-in for the bench: starts the server in the background, without a session of its own,
    as bench/review_bench.py does, then runs ``then`` (shell)."""
    return ["/bin/sh", "-c", f"{sys.executable} -c {SERVER!r} {pid_file} & {then}"]


def server_pid(pid_file: Path) -> int:
    return int(wait_until(lambda: pid_file.exists() and pid_file.read_text(), 30, "the server's pid"))


def test_a_stalled_command_fails_and_takes_what_it_started_with_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "server.pid"
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"printed nothing for 1 s"):
        then = f"until [ -s {pid_file} ]; do sleep 0.05; done; echo working >&2; sleep 600"  # the server is up
        run_in_group(bench(pid_file, then), tmp_path / "logs", stall=1, cap=600)
    assert time.monotonic() - started < 60  # the stall ended it, not the cap
    assert not alive(server_pid(pid_file))


def test_a_command_that_keeps_printing_is_not_stalled_and_its_leftovers_end_with_it(tmp_path: Path) -> None:
    """Five lines, one each half second, with a stall of 2 s: it runs to its end (2 s) and succeeds; the
    server it left behind (its parent exited without stopping it) is ended all the same."""
    pid_file = tmp_path / "server.pid"
    steps = "for i in 1 2 3 4 5; do echo step $i >&2; sleep 0.5; done; echo done"
    result = run_in_group(
        bench(pid_file, f"until [ -s {pid_file} ]; do sleep 0.05; done; {steps}"), tmp_path / "logs", stall=2, cap=600
    )
    assert (result.returncode, result.stdout) == (0, "done\n") and "step 5" in result.stderr
    assert not alive(server_pid(pid_file))

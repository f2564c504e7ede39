"""A child says it runs down the pipe its parent handed it; silence until then, end of file if it ends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gatekeeper.up.ready import ENV_READY_FD, ReadyPipe
from tests.helpers import wait_until
from tests.review_support import REPO


def child(pipe: ReadyPipe, code: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, ENV_READY_FD: str(pipe.fd), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, pass_fds=(pipe.fd,))
    pipe.handed_over()
    return proc


def test_a_child_that_says_it_runs_is_heard_and_one_that_ends_first_is_not() -> None:
    said = ReadyPipe()
    proc = child(said, "import time; from gatekeeper.up import ready; ready.notify(); time.sleep(60)")
    try:
        wait_until(said.said, 60, "the child's word")
    finally:
        proc.kill()
        proc.wait()
    silent = ReadyPipe()
    proc = child(silent, "import sys; sys.exit(3)")
    assert proc.wait(timeout=60) == 3
    assert not silent.said() and not silent.said()  # end of file: never ready
    said.close()
    silent.close()


def test_notify_without_a_parent_or_with_a_stray_variable_does_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = "from gatekeeper.up import ready; import os; ready.notify(); print(os.environ.get('GATEKEEPER_READY_FD'))"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(ENV_READY_FD, None)
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout == "None\n"
    with out.open("w") as file:  # the variable names stdout, a file here: nothing is written to it
        env[ENV_READY_FD] = "1"
        subprocess.run([sys.executable, "-c", code], env=env, stdout=file, check=True)
    assert out.read_text() == "None\n"

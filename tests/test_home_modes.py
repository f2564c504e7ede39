"""Everything Gatekeeper creates in its home is private (files 0600, folders 0700), whichever
command made it, even when the user's umask is the usual permissive 022."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.proxy_support import REPO, proxy_params, write_policy
from tests.review_support import free_port
from tests.test_up import Lines, stop

USUAL_UMASK = 0o022


def not_private(home: Path) -> list[str]:
    """Every path under ``home`` whose mode is not 0700 (folder) or 0600 (file)."""
    loose = []
    for path in [home, *sorted(home.rglob("*"))]:
        st = path.lstat()
        want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if stat.S_IMODE(st.st_mode) != want:
            loose.append(f"{path.relative_to(home)}: {stat.S_IMODE(st.st_mode):o}")
    return loose


def gk(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gatekeeper", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        umask=USUAL_UMASK,
        timeout=60,
    )


@contextmanager
def usual_umask() -> Iterator[None]:
    """Children inherit our umask: make it the common 022, whatever the machine's default."""
    previous = os.umask(USUAL_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


def wait_for(predicate, what: str, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_init_makes_a_private_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = gk("init", home=home)
    assert done.returncode == 0, done.stderr
    assert {p.name for p in home.iterdir()} >= {"gatekeeper.db", "secret.key", "logs"}
    assert not_private(home) == []


def test_init_tightens_a_database_an_older_up_left_world_readable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert gk("init", home=home).returncode == 0
    (home / "gatekeeper.db").chmod(0o644)
    done = gk("init", home=home)
    assert done.returncode == 0, done.stderr
    assert f"Made {home / 'gatekeeper.db'} private (mode 0600)" in done.stdout
    assert not_private(home) == []


@pytest.mark.slow
def test_up_on_a_new_home_makes_everything_private(tmp_path: Path) -> None:
    port = free_port()
    policy = write_policy(tmp_path)
    policy.write_text(policy.read_text().replace("version: 1\n", f"version: 1\nreview_url: http://127.0.0.1:{port}\n"))
    home = tmp_path / "home"
    argv = ["--home", str(home), "up", "--policy", str(policy), "--reviewer", "alice", "--password-stdin"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gatekeeper", *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        umask=USUAL_UMASK,
    )
    assert proc.stdin is not None
    proc.stdin.write("a long enough password\n")
    proc.stdin.close()
    lines = Lines(proc)
    try:
        # no --port: the review page listens where the policy's review_url sends agents
        assert lines.wait_for("Review page: ").endswith(f"http://localhost:{port}/")
        lines.wait_for("one-time link")
        wait_for(lambda: (home / "commit.lock").exists(), "the committer's lock")
        present = {p.name for p in home.iterdir()} | {p.name for p in (home / "logs").iterdir()}
        assert {"gatekeeper.db", "gatekeeper.db-wal", "gatekeeper.db-shm", "secret.key", "commit.lock"} <= present
        assert {"review.log", "commit.log"} <= present
        assert not_private(home) == []
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert not_private(home) == []
        assert not any(re.search("Warning: .*review_url", line) for line in lines.seen)
    finally:
        stop(proc)


@pytest.mark.anyio
async def test_a_proxy_run_keeps_the_home_private(tmp_path: Path) -> None:
    from mcp import Client

    home = tmp_path / "home"
    assert gk("init", home=home).returncode == 0
    policy = write_policy(tmp_path)
    (tmp_path / "workspace" / "notes" / "a.md").write_text("a\n")
    with usual_umask():
        async with Client(proxy_params(policy, home)) as c:
            assert not (await c.call_tool("read_note", {"path": "notes/a.md"})).is_error
            assert not (await c.call_tool("create_note", {"title": "t", "body": "b"})).is_error
            assert (home / "gatekeeper.db-wal").exists() and (home / "logs" / "notes.log").exists()
            assert not_private(home) == []
    assert not_private(home) == []


@pytest.mark.anyio
async def test_downstream_servers_get_the_users_umask_not_the_proxys(tmp_path: Path) -> None:
    """077 is for Gatekeeper's home; a server's own files (a git index, a cache) keep the user's modes."""
    from mcp import Client

    home = tmp_path / "home"
    assert gk("init", home=home).returncode == 0
    policy = write_policy(tmp_path)
    seen = tmp_path / "child-umask"
    text = policy.read_text()
    py = re.search(r"command: (\S+)", text)
    assert py is not None
    policy.write_text(
        text.replace(
            f"command: {py.group(1)}\n    args: [",
            f'command: /bin/sh\n    args: ["-c", "umask > {seen}; exec \\"$0\\" \\"$@\\"", "{py.group(1)}", ',
            1,
        )
    )
    with usual_umask():
        async with Client(proxy_params(policy, home)) as c:
            assert "read_note" in {t.name for t in (await c.list_tools()).tools}
    assert seen.read_text().strip() == "0022"

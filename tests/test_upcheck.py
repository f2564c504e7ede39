"""`gatekeeper up` that cannot start says so in one line and stops (exit 1): its port taken,
another `up` or committer on the home, a bad policy. No link, no restart loop, no child left."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from gatekeeper.errors import PolicyError
from gatekeeper.home import Home
from gatekeeper.policy import load_policy
from gatekeeper.store.proofs import PasswordProof
from gatekeeper.store.store import Store
from gatekeeper.up.checks import StartFailed, check_port, log_reason
from tests.helpers import draft, wait_until
from tests.process_support import Lines
from tests.proxy_support import write_policy
from tests.review_support import PASSWORD, REPO, free_port, start_up
from tests.up_support import children_of, running_on, start_allowance, stop


def policy_at(tmp_path: Path, port: int) -> Path:
    """The demo policy, its review_url on ``port`` (so `up` has no port warning to give)."""
    policy = write_policy(tmp_path)
    policy.write_text(policy.read_text().replace("version: 1\n", f"version: 1\nreview_url: http://127.0.0.1:{port}\n"))
    return policy


def failed_start(proc: subprocess.Popen[str], home: Path, others: tuple[int, ...] = ()) -> str:
    """`up`'s whole output, once it has ended with exit 1 in good time, having left nothing
    running on ``home`` but ``others`` (what ran there before it)."""
    proc.stdin = None  # start_up wrote the password and closed it
    try:
        out, _ = proc.communicate(timeout=start_allowance())
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)  # stops its children too
        out, _ = proc.communicate(timeout=30)
        raise AssertionError(f"`up` did not give up; it printed:\n{out}") from None
    assert proc.returncode == 1, out
    assert "login/link" not in out and "restarting" not in out, out
    assert sorted(running_on(home)) == sorted(others), "a child outlived `up`"
    return out


@pytest.mark.slow
def test_up_on_a_taken_port_says_so_and_stops(tmp_path: Path) -> None:
    port = free_port()
    policy, home = policy_at(tmp_path, port), tmp_path / "home"
    with socket.socket() as other:  # another program on the port: `up` must not send anyone there
        other.bind(("127.0.0.1", port))
        other.listen()
        out = failed_start(start_up(home, port, policy, PASSWORD), home)
    [line] = out.splitlines()
    assert line.startswith(f"Error: port {port} is in use by another program"), line
    assert re.search(r"`gatekeeper up --port \d+` \(\d+ is free\)", line), line
    assert not home.exists(), "nothing is made before `up` knows it can start"


@pytest.mark.slow
def test_a_second_up_on_the_same_home_names_the_first_and_leaves_it_working(tmp_path: Path) -> None:
    port = free_port()
    policy, home_dir = policy_at(tmp_path, port), tmp_path / "home"
    first = start_up(home_dir, port, policy, PASSWORD)
    lines = Lines(first)
    try:
        lines.wait_for("Committing into", timeout=start_allowance(60))
        kids = sorted(children_of(first.pid))
        second = start_up(home_dir, port, policy, PASSWORD)  # the same command again, the same port
        [line] = failed_start(second, home_dir, (*kids, first.pid)).splitlines()
        assert line.startswith("Error: another `gatekeeper up` is running on this home"), line
        assert f"pid {first.pid}, started " in line and f"`kill {first.pid}`" in line, line

        assert sorted(children_of(first.pid)) == kids  # the first's children were left alone
        assert httpx.get(f"http://127.0.0.1:{port}/login").status_code == 200
        home = Home(home_dir)
        with Store(home.db_path) as store:
            p = store.propose(replace(draft("notes/after.md", b"hi\n"), workspace=str(tmp_path / "workspace")))
            store.decide(
                p.id, verdict="approved", reviewer="alice", sha256=p.sha256, path="notes/after.md",
                proof=PasswordProof(PASSWORD),
            )  # fmt: skip
        lines.wait_for(f"committed {p.id}", timeout=30)
        assert not any("stopped" in seen or "restart" in seen for seen in lines.seen), lines.seen
    finally:
        stop(first)


@pytest.mark.slow
def test_up_beside_a_committer_run_by_hand_names_it(tmp_path: Path) -> None:
    port = free_port()
    policy, home = policy_at(tmp_path, port), tmp_path / "home"
    gk = [sys.executable, "-m", "gatekeeper", "--home", str(home)]
    subprocess.run([*gk, "init"], check=True, capture_output=True, cwd=REPO)
    committer = subprocess.Popen(
        [*gk, "commit", "--watch", "--policy", str(policy)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        lock = home / "commit.lock"
        wait_until(lambda: lock.exists() and f'"pid": {committer.pid}' in lock.read_text(), 60, "the committer's lock")
        [line] = failed_start(start_up(home, port, policy, PASSWORD), home, (committer.pid,)).splitlines()
        assert line.startswith(f"Error: another committer is running: pid {committer.pid} "), line
        assert f"`kill {committer.pid}`" in line and f"`gatekeeper review --port {port}`" in line, line
        assert committer.poll() is None and json.loads(lock.read_text())["pid"] == committer.pid
    finally:
        committer.send_signal(signal.SIGINT)
        committer.wait(timeout=30)


@pytest.mark.parametrize(
    "text",
    [
        None,  # no such file
        "version: 1\nservers: [oops\n",  # not YAML
        "version: 1\nservers:\n  notes:\n    command: [x]\n    tools:\n      write: {mode: sometimes}\n",
    ],
)
def test_up_with_a_bad_policy_stops_with_the_policys_own_error(tmp_path: Path, text: str | None) -> None:
    policy, home = tmp_path / "policy.yaml", tmp_path / "home"
    if text is not None:
        policy.write_text(text)
    with pytest.raises(PolicyError) as refused:
        load_policy(str(policy))
    out = failed_start(start_up(home, free_port(), policy, PASSWORD), home)
    assert out == f"Error: {refused.value}\n"  # each of its problems on a line, as `policy check` says them


@pytest.mark.parametrize(("family", "host"), [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")])
def test_a_port_taken_at_either_loopback_is_taken(family: socket.AddressFamily, host: str) -> None:
    """A browser may take localhost to ::1: a program there would get the log-in link."""
    with socket.socket(family) as other:
        try:
            other.bind((host, 0))
        except OSError:
            pytest.skip(f"no {host} on this machine")
        other.listen()
        port = other.getsockname()[1]
        with pytest.raises(StartFailed) as refused:
            check_port(port)
    assert f"port {port} is in use by another program (at {host})" in str(refused.value)
    check_port(port)  # free again


def test_a_childs_reason_is_its_last_error_and_the_fix_under_it(tmp_path: Path) -> None:
    log = tmp_path / "commit.log"
    log.write_text("Error: an older run's trouble\n")
    start = log.stat().st_size
    with log.open("a") as more:
        more.write("Watching x\nError: another committer is running: pid 7\n  → stop that one first\n")
    assert log_reason(log, start) == "another committer is running: pid 7 → stop that one first"
    with log.open("a") as more:
        more.write("ERROR:    [Errno 98] error while attempting to bind: address already in use\n")
    assert log_reason(log, start) == "[Errno 98] error while attempting to bind: address already in use"
    assert log_reason(log, log.stat().st_size) == "(it wrote nothing)"

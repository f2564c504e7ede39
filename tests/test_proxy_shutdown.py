"""No downstream server outlives the proxy (issue 1/7).

A host closes a server by ending its stdin, waiting 2 s, then SIGTERM (to the proxy's own
group only). The children run in their own sessions, and a server on the 1.x SDK ignores
stdin EOF, so the proxy must end them itself. Behind the proxy here: the real 1.x-SDK notes
server (tests/peers/old_sdk_notes.py), which records each start in a pid folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gatekeeper.home import Home
from tests.helpers import budget
from tests.peers.external import PEERS, old_notes_policy, ts_client_modules
from tests.process_support import alive, started, wait_for_count, wait_gone
from tests.proxy_support import PY, REPO, proxied

pytestmark = pytest.mark.slow
HOST_BUDGET = 2.0  # what hosts wait between closing stdin and SIGTERM


def _proxy(policy: Path, home: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "GATEKEEPER_HOME": str(home), "PYTHONPATH": str(REPO)}
    with open(home / "proxy-stderr.log", "a") as stderr:
        return subprocess.Popen(
            [PY, "-m", "gatekeeper", "proxy", "--policy", str(policy), *args],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,  # like the SDKs: our signals reach only the proxy
        )


def _session_up(proc: subprocess.Popen[str]) -> list[str]:
    """A 2025-11-25 handshake and a tools/list on the raw pipe; returns the tool names."""
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, object]) -> None:
        proc.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    assert json.loads(proc.stdout.readline())["id"] == 1
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    listed = json.loads(proc.stdout.readline())
    return [t["name"] for t in listed["result"]["tools"]]


def _exit_time(proc: subprocess.Popen[str], since: float, timeout: float = 10) -> float:
    proc.wait(timeout=timeout)
    return time.monotonic() - since


@pytest.mark.parametrize("how", ["eof", "SIGTERM", "SIGINT"])
def test_proxy_ends_children_on_eof_and_signals_within_the_hosts_budget(tmp_path: Path, home: Home, how: str) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    policy = old_notes_policy(tmp_path, pid_dir=pids)
    proc = _proxy(policy, home.path, "--downstream-mode", "legacy")
    with proc:  # its exit closes the pipes
        try:
            assert "add_note" in _session_up(proc)
            children = started(pids)
            assert len(children) == 1 and set(children.values()) == {proc.pid}
            t0 = time.monotonic()
            if how == "eof":
                proc.stdin.close()  # type: ignore[union-attr]
            else:
                proc.send_signal(getattr(signal, how))  # stdin stays open, as when a host signals first
            took = _exit_time(proc, t0)
            assert not any(alive(pid) for pid in children), "the proxy exited and left its child running"
            assert took < budget(HOST_BUDGET), f"the proxy took {took:.2f} s to end its children and exit"
            if how != "eof":
                assert proc.returncode == 128 + getattr(signal, how)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for pid in started(pids):
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)


# (host mode, downstream mode): the default, and one without the probe's restart in the way
PAIRS = [("auto", "auto"), ("legacy", "legacy")]


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "downstream"), PAIRS)
async def test_python_sdk_host_closing_leaves_no_process(
    tmp_path: Path, home: Home, mode: str, downstream: str
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    policy = old_notes_policy(tmp_path, pid_dir=pids)
    try:
        async with proxied(policy, home.path, mode, ("--downstream-mode", downstream)) as client:
            assert "add_note" in {t.name for t in (await client.list_tools()).tools}
            served_by = int((await client.call_tool("server_pid", {})).content[0].text)  # type: ignore[union-attr]
            assert served_by in started(pids)
            closing = time.monotonic()
        # the SDK returns as soon as the proxy exits, or after its own SIGTERM 2 s after EOF
        took = time.monotonic() - closing
        assert took < budget(HOST_BUDGET), f"the proxy did not exit within {HOST_BUDGET} s of stdin EOF ({took:.2f} s)"
        everything = set(started(pids)) | set(started(pids).values())  # the servers and the proxy
        wait_gone(everything, timeout=budget(HOST_BUDGET))
    finally:
        for pid in started(pids):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(("mode", "downstream"), PAIRS)
def test_typescript_sdk_host_closing_leaves_no_process(tmp_path: Path, home: Home, mode: str, downstream: str) -> None:
    """The TS SDK v2 client in `auto` also starts (and signals) a probe sibling of the proxy."""
    modules = ts_client_modules()
    pids = tmp_path / "pids"
    pids.mkdir()
    policy = old_notes_policy(tmp_path, pid_dir=pids)
    env = {
        **os.environ,
        "NODE_PATH": str(modules),
        "TS_CLIENT_SERVER_ENV": json.dumps({"GATEKEEPER_HOME": str(home.path), "PYTHONPATH": str(REPO)}),
        "TS_CLIENT_SERVER_CWD": str(tmp_path),
    }
    command = ["node", str(PEERS / "ts_client.mjs"), mode, PY, "-m", "gatekeeper", "proxy", "--policy", str(policy)]
    command += ["--downstream-mode", downstream]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        steps = [json.loads(line) for line in done.stdout.splitlines()]
        assert "add_note" in steps[1]["tools"] and steps[2]["closed"], steps
        proxy_pid = steps[0]["pid"]
        children = wait_for_count(pids, 1)
        assert proxy_pid in children.values()
        wait_gone(set(children) | {proxy_pid}, timeout=budget(HOST_BUDGET))
    finally:
        for pid in started(pids):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)

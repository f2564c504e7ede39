"""The proxy spawns its downstream servers before its heavy imports (issue 12, "start fast").

``gatekeeper proxy`` reads the policy's ``servers`` as plain data (policy/launch.py), starts each
child, and only then imports pydantic (the MCP SDK not at all without a url server); the first
``Downstream`` start adopts that running child. The tests use a tiny shell server wrapper that
stops the proxy (SIGSTOP) the moment it runs, looks at what the proxy has mapped (pydantic's
compiled core is the first native library the policy models or the SDK load), and lets it go on:
deterministic, no timing.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from gatekeeper.errors import PolicyError, SchemaTooNew
from gatekeeper.home import Home
from gatekeeper.policy import load_policy
from gatekeeper.policy.commands import executable
from gatekeeper.policy.launch import launches
from tests.proxy_support import PY, REPO

pytestmark = pytest.mark.slow

# Records its own pid (it leads its own process group), then becomes the real notes server.
WRAPPER = """#!/bin/sh
echo "$$ started" >> "$RECORD"
exec "$NOTES_PY" -m gatekeeper.demo.notes_server "$WORKSPACE"
"""

# Loaded into the proxy only (through its PYTHONPATH; the child's env sets its own): an audit hook
# that writes, in order, each module import and each process start. The order is the proof that
# the child was started before pydantic or the SDK was imported; no timing is involved.
SITECUSTOMIZE = """
import os, sys
_out = open(os.environ["GK_TRACE"], "a", buffering=1)
def _hook(event, args):
    if event == "import":
        _out.write("import " + str(args[0]) + "\\n")
    elif event == "subprocess.Popen":
        _out.write("popen " + " ".join(str(a) for a in (args[1] or ())) + "\\n")
sys.addaudithook(_hook)
"""


def _policy(tmp: Path, *, broken: bool = False) -> tuple[Path, Path]:
    workspace = tmp / "workspace"
    workspace.mkdir(exist_ok=True)
    wrapper = tmp / "notes-wrapper.sh"
    wrapper.write_text(WRAPPER)
    wrapper.chmod(0o755)
    record = tmp / "starts.txt"
    rule = "alow" if broken else "allow"  # a tool rule the servers-only read never looks at
    text = f"""
        version: 1
        servers:
          notes:
            command: ./notes-wrapper.sh
            workspace: {workspace}
            env: {{PYTHONPATH: "{REPO}", RECORD: "{record}", NOTES_PY: "{PY}", WORKSPACE: "{workspace}"}}
            tools:
              read_note: {rule}
    """
    policy = tmp / "policy.yaml"
    policy.write_text(textwrap.dedent(text))
    return policy, record


def _proxy(policy: Path, home: Path, trace: Path | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "GATEKEEPER_HOME": str(home), "PYTHONPATH": str(REPO)}
    if trace is not None:
        hooks = trace.parent / "hooks"
        hooks.mkdir(exist_ok=True)
        (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
        env |= {"PYTHONPATH": f"{hooks}{os.pathsep}{REPO}", "GK_TRACE": str(trace)}
    return subprocess.Popen(
        [PY, "-m", "gatekeeper", "proxy", "--policy", str(policy)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _starts(record: Path) -> list[tuple[int, str]]:
    if not record.exists():
        return []
    return [(int(pid), state) for pid, state in (line.split() for line in record.read_text().splitlines())]


def _group_gone(pgid: int, timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def _rpc(proc: subprocess.Popen[str], message: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()


def test_first_child_starts_before_pydantic_and_the_sdk_and_is_adopted(tmp_path: Path, home: Home) -> None:
    policy, record = _policy(tmp_path)
    trace = tmp_path / "trace.txt"
    proc = _proxy(policy, home.path, trace)
    with proc:
        _first_start(proc, record, home)
    events = trace.read_text().splitlines()
    first_spawn = next(i for i, e in enumerate(events) if e.startswith("popen") and "notes-wrapper.sh" in e)
    before = {e.split()[1].split(".")[0] for e in events[:first_spawn] if e.startswith("import ")}
    assert not before & {"pydantic", "pydantic_core", "mcp", "mcp_types"}, sorted(before)
    after = {e.split()[1].split(".")[0] for e in events[first_spawn:] if e.startswith("import ")}
    assert "pydantic" in after  # the trace saw the heavy import (the policy's models): it came after
    assert not after & {"mcp", "mcp_types"}, "the proxy never loads the SDK for a url-free policy"


def _first_start(proc: subprocess.Popen[str], record: Path, home: Home) -> None:
    try:
        assert proc.stdout is not None
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        assert json.loads(proc.stdout.readline())["id"] == 1
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = json.loads(proc.stdout.readline())
        assert "read_note" in [t["name"] for t in listed["result"]["tools"]]
        # One start only: the early child was adopted, not spawned again.
        assert [state for _, state in _starts(record)] == ["started"]
        log = (home.log_dir / "notes.log").read_text()
        assert log.count("--- gatekeeper: starting notes (match):") == 1  # the default mode
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=10)
        assert _group_gone(_starts(record)[0][0]), "the adopted child outlived the proxy"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("failure", ["policy", "schema"])
def test_a_start_up_error_after_the_early_spawn_leaves_no_child(tmp_path: Path, home: Home, failure: str) -> None:
    policy, record = _policy(tmp_path, broken=failure == "policy")
    if failure == "schema":
        with sqlite3.connect(home.db_path) as conn:
            conn.execute("UPDATE alembic_version SET version_num = '9999'")
    proc = _proxy(policy, home.path)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if failure == "policy":
        assert proc.returncode == PolicyError.exit_code
        assert "read_note" in err and "alow" in err
    else:
        assert proc.returncode == SchemaTooNew.exit_code
        assert "9999" in err
    assert err.startswith("Error: ") and "Traceback" not in err
    starts = _starts(record)
    assert len(starts) == 1, "the child was not started early"
    assert _group_gone(starts[0][0]), "a start-up error left the early child running"


def test_a_signal_during_start_up_ends_the_early_child(tmp_path: Path, home: Home) -> None:
    policy, record = _policy(tmp_path)
    with _proxy(policy, home.path) as proc:
        _signal_early(proc, record)
    assert proc.returncode == 128 + signal.SIGTERM
    assert _group_gone(_starts(record)[0][0])


def _signal_early(proc: subprocess.Popen[str], record: Path) -> None:
    try:
        deadline = time.monotonic() + 10
        while not _starts(record):
            assert time.monotonic() < deadline and proc.poll() is None, "the child never started"
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _examples() -> list[Path]:
    return [REPO / "policy.yaml", *sorted((REPO / "examples").glob("*.yaml"))]


@pytest.mark.parametrize("policy", _examples(), ids=lambda p: p.name)
def test_the_early_read_launches_what_the_full_model_does(policy: Path, tmp_path: Path) -> None:
    found = launches(policy, None)
    assert found is not None
    full = load_policy(policy)
    # a url server is not started by anyone (examples/http-vault.yaml): only children are launched early
    assert [launch.name for launch in found] == [n for n, s in full.servers.items() if not s.is_remote]
    for launch in found:
        server = full.servers[launch.name]
        assert (launch.command, launch.args, launch.env, launch.cwd, launch.given) == (
            executable(server),
            server.args,
            server.env,
            server.cwd,
            server.command,
        )


def test_the_early_read_resolves_paths_like_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "srv"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    policy = tmp_path / "p" / "policy.yaml"
    policy.parent.mkdir()
    policy.write_text(
        textwrap.dedent(
            f"""
            version: 1
            servers:
              a: {{command: ../bin/srv, args: [x, "y z"], cwd: .., workspace: ws}}
              b: {{command: srv, cwd: , workspace: ws, env: {{PATH: "{tmp_path / "bin"}", K: v}}}}
              c: {{command: ~/nowhere/srv, workspace: ws}}
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    found = launches(policy, None)
    assert found is not None
    full = load_policy(policy)
    for launch in found:
        server = full.servers[launch.name]
        assert (launch.command, launch.args, launch.env, launch.cwd) == (
            executable(server),
            server.args,
            server.env,
            server.cwd,
        )
    assert found[0].command == str(tool) and found[1].command == str(tool)


@pytest.mark.parametrize(
    "servers",
    [
        "[a, b]",
        "{a: {command: x, args: [1]}}",
        "{a: {command: '', workspace: w}}",
        "{a: {command: x, env: {K: 1}}}",
        "{a: {command: x, cwd: ''}}",
        "{'../a': {command: x}}",
        "{}",
    ],
)
def test_the_early_read_starts_nothing_on_doubt(tmp_path: Path, servers: str) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"version: 1\nservers: {servers}\n")
    assert launches(policy, None) is None

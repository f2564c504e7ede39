"""The fast path's cost floor and its per-call shortcuts (issue 12, session 6), on real parts.

- ``bench/relay.py uvloop-protocol``: the bench's floor for the proxy's design (uvloop, Protocol
  callbacks on both pipes, whole lines to ``transport.write``) must relay a real MCP exchange.
- ``ChildView.envelope``: a pipe's 2026 envelope is copied from the client's stamp, taken once;
  it must put exactly what the stamp puts on every raw method, with a real SDK client connected to
  the bundled notes server (2026-07-28); our own client's envelope (proxy/servers/stdio/handshake.py) is that
  SDK stamp's.
- The answer's id restored by a splice at its offset (``fastreply._restore_id``): an SDK server's
  compact answer reaches a raw 2025 host byte for byte but for the id, the child spoken to in
  2025-11-25 (``--downstream-mode legacy``) so nothing else is rewritten.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters, types

from gatekeeper.home import Home
from gatekeeper.proxy.fast import rewrite as eras
from gatekeeper.proxy.servers.stdio.handshake import Negotiated
from gatekeeper.proxy.servers.url.sdkclient import SdkClient
from tests.proxy_support import REPO, proxy_params

pytestmark = pytest.mark.timeout(60)
NOTES = [sys.executable, "-m", "gatekeeper.demo.notes_server"]


def test_the_protocol_relay_carries_a_real_exchange(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("alpha\n")
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *({"jsonrpc": "2.0", "id": i, "method": "tools/call",
           "params": {"name": "read_note", "arguments": {"path": "notes/a.md"}}} for i in range(2, 12)),
    ]  # fmt: skip
    relay = [sys.executable, str(REPO / "bench" / "relay.py"), "uvloop-protocol", "--", *NOTES, str(tmp_path)]
    with subprocess.Popen(relay, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        # All at once, in one write: the relay must split them into whole lines.
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
        proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in range(11)]
        proc.stdin.close()  # EOF reaches the child through the relay; both end
        assert proc.wait(timeout=20) == 0
    assert sorted(a["id"] for a in answers) == list(range(1, 12))  # the server may answer out of order
    assert all(a["result"]["content"][0]["text"] == "alpha\n" for a in answers[1:])


def _request(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "gatekeeper-fast-0", "method": method, "params": params}


@pytest.mark.anyio
async def test_a_pipes_envelope_is_what_the_sdk_stamp_puts(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    params = StdioServerParameters(command=NOTES[0], args=[*NOTES[1:], str(tmp_path)], env={"PYTHONPATH": str(REPO)})

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[])

    # As the proxy configured the SDK client toward a child: with a roots callback (capabilities).
    async with Client(params, mode="auto", cache=None, log_level="debug", list_roots_callback=roots) as client:
        assert client.protocol_version == "2026-07-28"  # the bundled server speaks the new era
        view = eras.ChildView.of(SdkClient(client), "2025-11-25")
        assert view.usable and view.modern and view.pipe_meta  # taken once, from the SDK's own stamp
        assert view.pipe_meta["io.modelcontextprotocol/logLevel"] == "debug"
        ours = Negotiated("2026-07-28", {}, None, None, {})
        assert json.dumps(ours.envelope) == json.dumps(view.pipe_meta)  # our client's stamp is the SDK's
        cases = [
            _request("tools/call", {"name": "read_note", "arguments": {"path": "x"}}),
            _request("tools/call", {"name": "n", "_meta": {"progressToken": "gatekeeper-fast-0", "x/y": 1}}),
            _request("tools/call", {"name": "n", "_meta": {"io.modelcontextprotocol/logLevel": "error"}}),
            _request("resources/read", {"uri": "note://a"}),
            _request("prompts/get", {"name": "summarize", "arguments": {"path": "a"}}),
            _request("completion/complete", {"ref": {"type": "ref/prompt", "name": "s"}, "argument": {}}),
        ]
        for case in cases:
            stamped, copied = copy.deepcopy(case), copy.deepcopy(case)
            view.stamp(stamped)
            assert view.envelope(copied) == {}  # a pipe sends no headers
            assert json.dumps(copied) == json.dumps(stamped)  # the same keys, values and order
        assert cases[2]["params"]["_meta"]["io.modelcontextprotocol/logLevel"] == "error"  # untouched input


def _exchange(argv: list[str], messages: list[dict[str, Any]], ids: int, env: dict[str, str], cwd: str) -> list[bytes]:
    """Send every message, read stdout until ``ids`` answers came back (notifications skipped)."""
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=cwd) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        answers: list[bytes] = []
        for message in messages:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
            if "id" in message:
                while "id" not in (answer := json.loads(line := proc.stdout.readline())):
                    pass  # a notification
                assert answer["id"] == message["id"], line
                answers.append(line)
        proc.stdin.close()
        proc.wait(timeout=20)
    assert len(answers) == ids
    return answers


def test_an_sdk_servers_answer_comes_back_byte_for_byte_but_the_id(tmp_path: Path, home: Home) -> None:
    workspace, seen = tmp_path / "workspace", tmp_path / "child-in.log"
    (workspace / "notes").mkdir(parents=True)
    (workspace / "notes" / "a.md").write_text('alpha "quoted" é\n')
    notes = f"{sys.executable} -m gatekeeper.demo.notes_server {workspace}"
    policy = tmp_path / "policy.yaml"  # the child behind tee: what it received is read back below
    policy.write_text(
        "version: 1\nservers:\n  notes:\n    command: /bin/sh\n"
        f"    args: [-c, 'tee {seen} | {notes}']\n    workspace: {workspace}\n"
        f'    env: {{PYTHONPATH: "{REPO}"}}\n    tools:\n      read_note: allow\n'
    )
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    read = {"name": "read_note", "arguments": {"path": "notes/a.md"}}
    messages = [
        {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "list", "method": "tools/list"},
        *({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": read} for rid in (7, "seven", -1)),
    ]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    direct = _exchange(notes.split(), messages, 5, env, str(tmp_path))[2:]
    params = proxy_params(policy, home.path, "--downstream-mode", "legacy")
    proxied = _exchange([params.command, *params.args], messages, 5, {**params.env, **env}, str(tmp_path))[2:]
    calls = [json.loads(line) for line in seen.read_text().splitlines() if '"tools/call"' in line]
    assert [c["id"] for c in calls] == ["gatekeeper-fast-0", "gatekeeper-fast-1", "gatekeeper-fast-2"]  # raw
    assert b'"id":7,' in proxied[0] and b'"id":"seven",' in proxied[1] and b'"id":-1,' in proxied[2]
    assert proxied == direct  # the child's bytes, with the host's id at the same place

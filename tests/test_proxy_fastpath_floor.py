"""The fast path's cost floor and its per-call shortcuts (issue 12, session 6), on real parts.

- ``bench/relay.py uvloop-protocol``: the bench's floor for the proxy's design (uvloop, Protocol
  callbacks on both pipes, whole lines to ``transport.write``) must relay a real MCP exchange.
- ``ChildView.envelope``: a pipe's 2026 envelope is copied from the SDK client's stamp, taken once;
  it must put exactly what the stamp puts on every raw method, with a real SDK client connected to
  the bundled notes server (2026-07-28).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from gatekeeper.proxy import eras
from tests.proxy_support import REPO

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
    async with Client(params, mode="auto", cache=None, log_level="debug") as client:  # as proxy/downstream.py
        assert client.protocol_version == "2026-07-28"  # the bundled server speaks the new era
        view = eras.ChildView.of(client, "2025-11-25")
        assert view.usable and view.modern and view.pipe_meta  # taken once, from the SDK's own stamp
        assert view.pipe_meta["io.modelcontextprotocol/logLevel"] == "debug"
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

"""A server's output is untrusted: a line that never ends is refused, not held (issue 24, item 13).

tests/peers/flooding_server.py answers the handshake, then writes 50 MiB of one answer with no
newline. The real proxy, driven as a subprocess by a raw host, must stop reading it at the cap
(proxy/protocol/framing.py): its peak memory (VmHWM) grows by about the cap, not by the 50 MiB; the call
waiting on that answer gets an error saying why; a ``server_output_refused`` event is stored; and
the next call starts the server again. Our client alone (proxy/servers/stdio/rpc.py, the regular path) fails
its pending request with the same reason.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from gatekeeper import humane
from gatekeeper.home import Home
from gatekeeper.proxy.protocol import mcp as w
from gatekeeper.proxy.protocol.framing import CHILD_LINE_BYTES
from gatekeeper.proxy.protocol.rpc import RpcError
from gatekeeper.proxy.servers.stdio.handshake import negotiate
from gatekeeper.proxy.servers.stdio.process import ChildCommand, child_process
from gatekeeper.proxy.servers.stdio.rpc import ChildSession, serving
from gatekeeper.store import events as ev
from tests.helpers import wait_until
from tests.process_support import alive
from tests.proxy_support import REPO, events
from tests.test_proxy_fastpath import call
from tests.test_proxy_wire import RawProxy

pytestmark = pytest.mark.timeout(180)
MiB = 1024 * 1024
FLOOD = 50 * MiB
POLICY = """
version: 1
servers:
  flooding:
    command: {py}
    args: ["-m", "tests.peers.flooding_server"]
    cwd: {repo}
    workspace: {workspace}
    env: {{PYTHONPATH: "{repo}", FLOOD_BYTES: "{flood}"}}
    tools:
      flood: allow
      echo: allow
      pid: allow
"""


def peak_kib(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for {pid}")


def text_of(answer: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in answer["result"]["content"])


def started_proxy(tmp: Path, home: Home) -> RawProxy:
    workspace = tmp / "workspace"
    workspace.mkdir()
    policy = tmp / "policy.yaml"
    text = POLICY.format(py=sys.executable, repo=REPO, workspace=workspace, flood=FLOOD)
    policy.write_text(textwrap.dedent(text))
    proxy = RawProxy(policy, home.path)
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    proxy.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": init})
    assert "result" in proxy.wait_for("init")
    proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    proxy.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
    assert "result" in proxy.wait_for("list"), proxy.lines
    return proxy


def test_a_server_flooding_one_endless_line_is_cut_off_refused_and_restarted(tmp_path: Path, home: Home) -> None:
    proxy = started_proxy(tmp_path, home)
    try:
        proxy.send(call("pid-1", "pid"))
        first = int(text_of(proxy.wait_for("pid-1")))
        before = peak_kib(proxy.proc.pid)

        proxy.send(call("flood", "flood"))
        answer = proxy.wait_for("flood", timeout=90)
        after = peak_kib(proxy.proc.pid)
        print(f"proxy VmHWM: {before} KiB before the 50 MiB flood, {after} KiB after (+{after - before} KiB)")

        assert answer["result"]["isError"] is True
        said = text_of(answer)
        assert "flooding" in said and f"over {humane.size(CHILD_LINE_BYTES)}" in said and "restarted" in said, said
        assert (after - before) * 1024 < CHILD_LINE_BYTES + 16 * MiB, (before, after)  # not the 50 MiB

        refused = wait_until(lambda: events(home.path, ev.SERVER_OUTPUT_REFUSED), 30, "the refusal event")
        [(_, _, payload)] = refused
        refusal = json.loads(payload)
        assert refusal["server"] == "flooding" and refusal["why"] == "line_too_long"
        assert refusal["limit"] == CHILD_LINE_BYTES and CHILD_LINE_BYTES < refusal["size"] < FLOOD

        proxy.send(call("pid-2", "pid"))
        second = int(text_of(proxy.wait_for("pid-2", timeout=60)))
        assert second != first and not alive(first)  # a new life; the flooding one was ended
        proxy.send(call("echo", "echo"))
        assert text_of(proxy.wait_for("echo")) == "echo"
        proxy.assert_stdout_is_jsonrpc()
    finally:
        proxy.close()


@pytest.mark.anyio
async def test_our_client_fails_the_pending_request_with_the_reason(tmp_path: Path) -> None:
    refusals: list[dict[str, Any]] = []
    command = ChildCommand(sys.executable, ["-m", "tests.peers.flooding_server"], {"PYTHONPATH": str(REPO)}, REPO)
    with open(tmp_path / "child.err", "w", encoding="utf-8") as errlog, anyio.fail_after(60):
        async with child_process(command, errlog, limit=MiB, on_refusal=refusals.append) as process:
            session = ChildSession(process.stdin.send, name="flooding")
            async with serving(session, process.stdout):
                await negotiate(session, "legacy")
                with pytest.raises(RpcError) as caught:
                    await session.request("tools/call", {"name": "flood", "arguments": {}})
    assert caught.value.code == w.CONNECTION_CLOSED
    assert caught.value.message.startswith("Connection closed: its output had a line over 1.0 MB")
    [refusal] = refusals
    assert refusal["why"] == "line_too_long" and refusal["limit"] == MiB and MiB < refusal["size"] < 2 * MiB

"""What a fast call asks a 2026-07-28 child for in logs: the host's own opt-in, never more.

The SDK client toward a child asks for ``debug`` on every request (so a 2025 host, whose servers
send logs unconditionally, still gets every line). A 2026 host opts in per request; asking the
child for ``debug`` anyway only makes it do the work of lines the proxy then drops. The probe
server (tests/peers/probe_server.py, on the SDK 2.3, so 2026-capable) reports the level its
request asked for.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from gatekeeper.home import Home
from tests.proxy_support import REPO
from tests.test_proxy_fastpath import answer_line, call, envelope
from tests.test_proxy_wire import RawProxy

pytestmark = pytest.mark.timeout(120)
LEVEL = "io.modelcontextprotocol/logLevel"


def probe_policy(tmp: Path) -> Path:
    workspace = tmp / "workspace"
    workspace.mkdir(exist_ok=True)
    policy = tmp / "policy.yaml"
    policy.write_text(
        textwrap.dedent(
            f"""
            version: 1
            servers:
              probe:
                command: {sys.executable}
                args: ["-m", "tests.peers.probe_server"]
                cwd: {REPO}
                env: {{PYTHONPATH: "{REPO}"}}
                workspace: {workspace}
                tools: {{log_opt_in: allow}}
            """
        )
    )
    return policy


def asked(proxy: RawProxy, rid: int, **meta: object) -> str:
    proxy.send(call(rid, "log_opt_in", **meta))
    result = json.loads(answer_line(proxy, rid))["result"]
    assert result["isError"] is False, result
    return str(result["content"][0]["text"])


def test_a_2026_hosts_fast_call_asks_the_child_for_the_hosts_level(tmp_path: Path, home: Home) -> None:
    proxy = RawProxy(probe_policy(tmp_path), home.path)
    try:
        proxy.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": {"_meta": envelope()}})
        proxy.wait_for("list")
        assert asked(proxy, 1, **envelope()) == "none"  # no opt-in: the child is asked for none
        assert asked(proxy, 2, **envelope(**{LEVEL: "warning"})) == "warning"
        assert asked(proxy, 3, **envelope(**{LEVEL: "debug"})) == "debug"
        proxy.assert_stdout_is_jsonrpc()
    finally:
        proxy.close()


def test_a_2025_host_still_gets_every_log_line_asked_for(tmp_path: Path, home: Home) -> None:
    proxy = RawProxy(probe_policy(tmp_path), home.path)
    try:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        proxy.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        proxy.wait_for(0)
        proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert asked(proxy, 1) == "debug"
    finally:
        proxy.close()

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
from typing import Any

import pytest

from gatekeeper.home import Home
from tests.proxy_support import REPO
from tests.test_proxy_fastpath import answer_line, call, envelope, raw_policy, wait_until
from tests.test_proxy_wire import RawProxy

pytestmark = pytest.mark.timeout(120)
LEVEL = "io.modelcontextprotocol/logLevel"
CHILD_IN_2026 = ("--downstream-mode", "auto")
"""For a 2025 host: the default (``match``) would speak 2025-11-25 to the child, which has no
per-request log opt-in to look at."""


def probe_policy(tmp: Path, *more: str) -> Path:
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
                tools: {{log_opt_in: allow{"".join(f", {tool}: allow" for tool in more)}}}
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
    proxy = RawProxy(probe_policy(tmp_path), home.path, *CHILD_IN_2026)
    try:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        proxy.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        proxy.wait_for(0)
        proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert asked(proxy, 1) == "debug"
    finally:
        proxy.close()


def logs_of(proxy: RawProxy) -> list[dict[str, Any]]:
    return [m["params"] for m in map(json.loads, list(proxy.lines)) if m.get("method") == "notifications/message"]


def test_a_2025_hosts_set_level_is_honoured_and_asked_of_the_child(tmp_path: Path, home: Home) -> None:
    """The proxy forwards child logs, so it declares ``logging`` and honours ``logging/setLevel``."""
    proxy = RawProxy(probe_policy(tmp_path, "steps"), home.path, *CHILD_IN_2026)
    try:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        proxy.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        assert "logging" in proxy.wait_for(0)["result"]["capabilities"]
        proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        proxy.send(call(1, "steps", {"n": 2}))
        answer_line(proxy, 1)
        wait_until(lambda: len(logs_of(proxy)) == 2, "the two info lines of the first call")
        proxy.send({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "warning"}})
        assert proxy.wait_for(2)["result"] == {}
        assert asked(proxy, 3) == "warning"  # the 2026 child is asked for no more than the host wants
        proxy.send(call(4, "steps", {"n": 3}))  # info lines 1-3: below warning
        answer_line(proxy, 4)
        proxy.send({"jsonrpc": "2.0", "id": 6, "method": "logging/setLevel", "params": {"level": "info"}})
        proxy.wait_for(6)
        proxy.send(call(7, "steps", {"n": 1}))
        answer_line(proxy, 7)
        # The child's lines reach the host in the child's order: once call 7's line is here, any
        # line of call 4 that got through would be here before it.
        wait_until(lambda: [p["data"] for p in logs_of(proxy)].count("log line 1") >= 2, "call 7's line")
        assert [p["data"] for p in logs_of(proxy)] == ["log line 1", "log line 2", "log line 1"]
        proxy.assert_stdout_is_jsonrpc()
    finally:
        proxy.close()


def test_a_2025_hosts_level_filters_a_handshake_era_childs_lines(tmp_path: Path, home: Home) -> None:
    """A 2025 child has no per-request opt-in: it sends every line, and the proxy drops those below
    the host's level (tests/peers/raw_server.py logs one info line per ``progress`` call, before its answer)."""
    proxy = RawProxy(raw_policy(tmp_path, "raw"), home.path)
    try:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        proxy.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        proxy.wait_for(0)
        proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        proxy.send(call(1, "progress", progressToken="a"))
        answer_line(proxy, 1)
        assert len(logs_of(proxy)) == 1
        for rid, level in ((2, "error"), (5, "debug")):
            proxy.send({"jsonrpc": "2.0", "id": rid, "method": "logging/setLevel", "params": {"level": level}})
            proxy.wait_for(rid)
            proxy.send(call(rid + 1, "progress", progressToken=f"t{rid}"))
            answer_line(proxy, rid + 1)
            # A 19-digit number keeps a call off the fast path: its line comes through the SDK client.
            proxy.send(call(rid + 2, "progress", {"big": 10**20}, progressToken=f"s{rid}"))
            answer_line(proxy, rid + 2)
        wait_until(lambda: len(logs_of(proxy)) >= 3, "the lines of the two calls at debug")
        assert [p["level"] for p in logs_of(proxy)] == ["info"] * 3  # none while the level was error
        proxy.assert_stdout_is_jsonrpc()
    finally:
        proxy.close()

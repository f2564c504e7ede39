"""Our own host side (proxy/session.py), the only one: the SDK's ``Server`` no longer serves the host.
tests/test_proxy_host_contract.py holds every recorded case; here each test also proves from the
proxy's log that our host side served and, for an ordinary session, that the MCP SDK was never loaded
(``hostlean.sdk_note``): a few raw-host cases, the official client as the host, our own params checks,
stdio as files, completions and listen limits, and the retired ``GATEKEEPER_PROXY_HOST=sdk`` switch."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.home import Home
from gatekeeper.proxy.session import LISTEN_LIMIT
from tests import test_proxy_wire
from tests.helpers import budget, wait_until
from tests.host_contract_support import (
    Answer,
    Notice,
    Send,
    handshake,
    initialize,
    modern,
    notification,
    play,
    raw_proxy,
    request,
)
from tests.proxy_support import REPO, proxy_params, run_on_files, write_policy
from tests.test_proxy_host_contract import CASES
from tests.test_proxy_shutdown import HOST_BUDGET
from tests.test_proxy_wire import RawProxy

LEAN_MARK = "host side: lean"
"""What the proxy logs when it serves the host itself: proof the switch took effect."""


SDK_MARK = "host side: sdk"
"""What the proxy logged when the SDK's server served the host (the retired ``GATEKEEPER_PROXY_HOST=sdk``)."""
NO_SDK_MARK = "host side ended; the MCP SDK was never loaded"
"""What the proxy logs at the end of a session that never imported ``mcp`` or ``mcp_types``."""


def served_lean(home: Home) -> bool:
    log = home.log_dir / "proxy.log"
    return log.exists() and LEAN_MARK in log.read_text(encoding="utf-8")


def served_without_sdk(home: Home) -> bool:
    return served_lean(home) and NO_SDK_MARK in proxy_log(home)


def end_input(proxy: RawProxy) -> None:
    """End the proxy as a host does, by closing its stdin: it logs whether it loaded the SDK, and exits."""
    assert proxy.proc.stdin is not None
    proxy.proc.stdin.close()
    assert proxy.proc.wait(timeout=30) == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "name", ["initialize-2025-11-25-then-ping", "tools-list-2025", "tools-list-2026", "own-tool-errors-2026"]
)
def test_a_raw_host_gets_todays_answers_from_our_own_host_side_without_the_sdk(
    name: str, tmp_path: Path, home: Home
) -> None:
    case = CASES[name]
    with raw_proxy(tmp_path, home.path) as proxy:
        transcript = play(proxy, tmp_path, case.steps)
        end_input(proxy)
    if case.any_order:
        assert sorted(transcript, key=json.dumps) == sorted(case.transcript, key=json.dumps)
    else:
        assert transcript == case.transcript
    assert served_without_sdk(home)


ORACLE_MARK = "checked by the SDK's validator"
"""What the proxy logs when it hands a request's params to the SDK's models (proxy/host/params.py)."""


@pytest.mark.timeout(120)
def test_a_normal_session_never_asks_the_sdks_models_and_bad_params_do(tmp_path: Path, home: Home) -> None:
    """initialize, tools/list and tools/call (both eras, our own tool and a child's) are checked by
    our own rules; only params they cannot vouch for go to the SDK's validator, with today's text."""
    status = {"name": "gatekeeper_proposal_status", "arguments": {"proposal_id": "nope"}}
    read = {"name": "notes__read_note", "arguments": {"path": "notes/x.md"}}
    normal = [
        *handshake(),
        Send(request(1, "tools/list")),
        Send(request(2, "tools/call", status)),
        Send(request(3, "tools/call", read)),
        Answer(1),
        Answer(2),
        Answer(3),
    ]
    with raw_proxy(tmp_path, home.path) as proxy:
        transcript = play(proxy, tmp_path, normal)
        assert len(transcript) == 4 and all("result" in m for m in transcript), transcript
        assert served_lean(home) and ORACLE_MARK not in proxy_log(home)
        play(proxy, tmp_path, [Send(request(4, "tools/call", {"name": 5})), Answer(4)])
        assert proxy.lines[-1] and json.loads(proxy.lines[-1])["error"] == {
            "code": -32602,
            "message": "invalid params for tools/call: params.name: Input should be a valid string",
        }
        assert ORACLE_MARK in proxy_log(home)
        end_input(proxy)
    with raw_proxy(tmp_path / "modern", home.path) as proxy:
        play(proxy, tmp_path, [Send(modern(1, "server/discover")), Send(modern(2, "tools/list")), Answer(1), Answer(2)])
        play(proxy, tmp_path, [Send(modern(3, "tools/call", status)), Answer(3)])
        end_input(proxy)
    log = proxy_log(home)
    assert log.count(ORACLE_MARK) == 1
    # the bad params loaded the SDK's models in the first session; the second never loaded the SDK
    assert log.count("host side ended; the MCP SDK was loaded (") == 1 and log.count(NO_SDK_MARK) == 1


def proxy_log(home: Home) -> str:
    return (home.log_dir / "proxy.log").read_text(encoding="utf-8")


@pytest.mark.timeout(60)
def test_regular_files_as_stdin_and_stdout_are_served_by_our_own_host_side(tmp_path: Path, home: Home) -> None:
    """No event loop can watch a regular file: stdin is read in a thread, stdout written blocking,
    and the lean host still serves (before, a file sent it back to the SDK host). The input ends at
    once, so a request still in flight then may be answered -32000, as the SDK host answers it."""
    params = proxy_params(write_policy(tmp_path), home.path)
    lines = [
        initialize("init"),
        notification("notifications/initialized"),
        request(1, "tools/list"),
        request(2, "tools/call", {"name": 5}),
    ]
    sent = b"".join(json.dumps(line).encode() + b"\n" for line in lines) + b"{oops\n"
    by_id = {m.get("id"): m for m in run_on_files(params, sent, tmp_path)}
    assert by_id["init"]["result"]["serverInfo"]["name"] == "gatekeeper"
    closed = {"code": -32000, "message": "Connection closed"}
    assert by_id[1].get("error") == closed or any(t["name"] == "notes__read_note" for t in by_id[1]["result"]["tools"])
    assert by_id[2]["error"] in (
        closed,
        {"code": -32602, "message": "invalid params for tools/call: params.name: Input should be a valid string"},
    )
    assert by_id[None]["error"]["code"] == -32700
    assert len(by_id) == 4 and served_lean(home)


SLOW_NOTES = """
version: 1
servers:
  notes:
    command: /bin/sh
    args: ["-c", "{delay}exec {py} -m gatekeeper.demo.notes_server {ws}"]
    workspace: {workspace}
    env: {{PYTHONPATH: "{repo}"}}
    tools:
      read_note: allow
"""
SLOW_START = 6.0
"""Seconds the slow notes server sleeps before its own start: longer than the 5 s the handshake used to wait."""


def capabilities_of(tmp: Path, home: Home, delay: float) -> list[dict[str, Any]]:
    """What a host is told by two ``initialize`` on one connection, the notes server (which offers
    completions) starting ``delay`` s late behind a shell that sleeps before it execs the server."""
    workspace = tmp / "workspace"
    (workspace / "notes").mkdir(parents=True, exist_ok=True)
    policy = tmp / f"policy-{delay:g}.yaml"
    wait = f"/bin/sleep {delay:g}; " if delay else ""
    policy.write_text(SLOW_NOTES.format(delay=wait, py=sys.executable, workspace=workspace, ws=workspace, repo=REPO))
    proxy = RawProxy(policy, home.path)
    try:
        proxy.send(initialize("i1"))
        first = proxy.wait_for("i1", timeout=delay + 60)["result"]["capabilities"]
        proxy.send(notification("notifications/initialized"))
        proxy.send(request("l1", "tools/list"))
        assert any(tool["name"] == "read_note" for tool in proxy.wait_for("l1", timeout=60)["result"]["tools"])
        proxy.send(initialize("i2"))  # the same connection asks again: the answer is the connection's
        return [first, proxy.wait_for("i2", timeout=60).get("result", {}).get("capabilities")]
    finally:
        proxy.close()


@pytest.mark.timeout(180)
def test_the_same_policy_advertises_the_same_capabilities_however_slowly_its_server_starts(
    tmp_path: Path, home: Home
) -> None:
    """Capabilities are fixed at the handshake: they must be the policy's, not the moment's. A notes
    server that takes longer to start than the handshake used to wait for it (a loaded machine)
    still makes the proxy advertise its completions, as the same server started at once does."""
    fast = capabilities_of(tmp_path / "fast", home, 0)
    started = time.monotonic()
    slow = capabilities_of(tmp_path / "slow", home, SLOW_START)
    assert time.monotonic() - started >= SLOW_START  # it did wait for the slow start
    assert fast[0]["completions"] == {}
    assert slow[0] == fast[0]
    assert slow[1] == slow[0]  # a second initialize on the connection tells the same
    assert served_lean(home)


@pytest.mark.timeout(120)
def test_a_host_holds_at_most_the_sdks_number_of_listen_streams(tmp_path: Path, home: Home) -> None:
    """1024 open listen streams (the SDK's ``ListenHandler`` limit) are acknowledged; one more is
    refused -32603 before any ack, as the SDK server refused it; the ack echoes resource URIs asked for."""
    wanted = {"toolsListChanged": True, "promptsListChanged": False, "resourceSubscriptions": ["note://a"]}
    with raw_proxy(tmp_path, home.path) as proxy:
        for n in range(LISTEN_LIMIT):
            proxy.send(modern(n, "subscriptions/listen", {"notifications": wanted}))
        proxy.send(modern("over", "subscriptions/listen", {"notifications": wanted}))
        refused = proxy.wait_for("over", timeout=60)
        acks = wait_until(lambda: all_acknowledged(proxy.lines), 60, "an ack for every stream under the limit")
    assert acks is not None
    assert refused["error"] == {"code": -32603, "message": "Subscription limit reached"}
    assert {json.dumps(a["notifications"], sort_keys=True) for a in acks} == {
        json.dumps({"toolsListChanged": True, "resourceSubscriptions": ["note://a"]}, sort_keys=True)
    }
    assert sorted(a["_meta"]["io.modelcontextprotocol/subscriptionId"] for a in acks) == list(range(LISTEN_LIMIT))


def all_acknowledged(lines: list[bytes]) -> list[dict[str, Any]] | None:
    """The acks' params once there are ``LISTEN_LIMIT`` of them (None before)."""
    found = [json.loads(line) for line in list(lines)]
    acks = [m["params"] for m in found if m.get("method") == "notifications/subscriptions/acknowledged"]
    return acks if len(acks) == LISTEN_LIMIT else None


@pytest.mark.timeout(120)
def test_the_retired_sdk_host_switch_is_ignored(tmp_path: Path, home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    """``GATEKEEPER_PROXY_HOST=sdk`` once put the SDK's server toward the host; now our own serves, SDK-free."""

    def with_switch(policy: Path, home_path: Path, *extra: str) -> Any:
        params = proxy_params(policy, home_path, *extra)
        return params.model_copy(update={"env": {**(params.env or {}), "GATEKEEPER_PROXY_HOST": "sdk"}})

    monkeypatch.setattr(test_proxy_wire, "proxy_params", with_switch)
    case = CASES["initialize-2025-11-25-then-ping"]
    with raw_proxy(tmp_path, home.path) as proxy:
        assert play(proxy, tmp_path, case.steps) == case.transcript
        end_input(proxy)
    assert SDK_MARK not in proxy_log(home) and served_without_sdk(home)


@pytest.mark.timeout(60)
def test_at_the_end_of_input_a_listen_stream_is_closed_and_the_proxy_ends_within_the_hosts_budget(
    tmp_path: Path, home: Home
) -> None:
    """The host closes stdin while a listen stream is open: the stream's request is answered -32000
    ``Connection closed`` (as the SDK answered every request in flight), and the proxy, children
    and all, is gone before a host would send SIGTERM."""
    with raw_proxy(tmp_path, home.path) as proxy:
        proxy.send(modern("sub", "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
        play(proxy, tmp_path, [Notice("notifications/subscriptions/acknowledged")])
        assert proxy.proc.stdin is not None
        started = time.monotonic()
        proxy.proc.stdin.close()
        proxy.proc.wait(timeout=30)
        took = time.monotonic() - started
        assert proxy.wait_for("sub")["error"] == {"code": -32000, "message": "Connection closed"}
    assert took < budget(HOST_BUDGET), f"the proxy took {took:.2f} s to end after its input did"
    assert served_lean(home)

"""Downstream servers misbehaving on purpose (tests/peers/probe_server.py, a real MCP server):
crashes, cancellation, changing tool lists and definitions, roots requests, failed starts."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import anyio
import pytest
from mcp import MCPError, types

from gatekeeper.home import Home
from tests.helpers import LAST_RESORT, await_until
from tests.proxy_support import PY, events, proxied, write_policy

pytestmark = pytest.mark.anyio
MODES = ["auto", "legacy"]


def text(result: types.CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_two_servers_get_prefixes_and_echo_is_exact(tmp_path: Path, home: Home, mode: str) -> None:
    policy = write_policy(tmp_path, probe=True)
    async with proxied(policy, home.path, mode) as p:
        names = {t.name for t in (await p.list_tools()).tools}
        assert {"notes__read_note", "notes__create_note", "probe__echo", "probe__put"} <= names
        assert "read_note" not in names and "gatekeeper_proposal_status" in names
        value = {"n": 12345678901234567890, "f": 1.0, "z": None, "s": "1", "list": [True, {"k": []}]}
        result = await p.call_tool("probe__echo", {"value": value})
        assert json.loads(text(result)) == {"value": value}


@pytest.mark.timeout(120)  # a lost kill or a call never answered must not hang the run
@pytest.mark.parametrize("mode", MODES)
async def test_child_killed_mid_call_gives_a_tool_error_and_the_next_call_works(
    tmp_path: Path, home: Home, mode: str
) -> None:
    policy = write_policy(tmp_path, probe=True, notes=False)
    async with proxied(policy, home.path, mode) as p:
        first_pid = int(text(await p.call_tool("pid", {})))
        died = await p.call_tool("die", {})
        assert died.is_error and "probe" in text(died) and "stopped during the call" in text(died)
        second_pid = int(text(await p.call_tool("pid", {})))  # restarted on demand
        assert second_pid != first_pid
        marker, started = tmp_path / "never", tmp_path / "started"
        async with anyio.create_task_group() as tg:
            results: list[types.CallToolResult] = []

            async def slow() -> None:
                args = {"marker": str(marker), "seconds": 600, "started": str(started)}
                results.append(await p.call_tool("sleep_then_touch", args))

            tg.start_soon(slow)
            await await_until(started.exists, 30, "the child to start the slow call")
            assert int(started.read_text()) == second_pid  # the call is in the child we kill
            os.kill(second_pid, signal.SIGKILL)
        assert results[0].is_error and "stopped during the call" in text(results[0])
        assert int(text(await p.call_tool("pid", {}))) not in (first_pid, second_pid)
        assert not marker.exists()
    kinds = [e[0] for e in events(home.path)]
    assert kinds.count("server_exited") >= 2 and kinds.count("server_started") >= 3


SLOW_RESTART = 6.0
"""Seconds the probe server sleeps before every start but its first: longer than ``PROBE_TIMEOUT`` (5 s)."""


@pytest.mark.timeout(120)
async def test_a_2026_child_slow_to_start_again_is_waited_for(tmp_path: Path, home: Home) -> None:
    """On a loaded machine a child takes longer to start. Its era is known from its first start, so its
    restart is no probe of an unknown server: the proxy waits for it (the call, up to its own wait for a
    start), instead of declaring it "not available: no answer to server/discover within 5 s"."""
    once = tmp_path / "started-once"
    wrapper = f"if [ -e {once} ]; then sleep {SLOW_RESTART:g}; fi; touch {once}; exec {PY} -m tests.peers.probe_server"
    policy = write_policy(tmp_path, probe=True, notes=False)
    policy.write_text(
        policy.read_text()
        .replace(f"command: {PY}", "command: /bin/sh", 1)
        .replace('["-m", "tests.peers.probe_server"]', json.dumps(["-c", wrapper]), 1)
    )
    async with proxied(policy, home.path, "auto") as p:
        first = int(text(await p.call_tool("pid", {})))
        assert (await p.call_tool("die", {})).is_error
        again = await p.call_tool("pid", {})
        assert not again.is_error, text(again)
        assert int(text(again)) != first
    started = [json.loads(e[2]) for e in events(home.path, "server_started")]
    assert [(e["era"], e["era_remembered"]) for e in started] == [("modern", False), ("modern", True)]
    assert not events(home.path, "server_failed")


@pytest.mark.timeout(120)  # the child sleeps 600 s unless cancelled
@pytest.mark.parametrize("mode", MODES)
async def test_cancellation_reaches_the_child(tmp_path: Path, home: Home, mode: str) -> None:
    policy = write_policy(tmp_path, probe=True, notes=False)
    marker, started, cancelled = tmp_path / "marker", tmp_path / "started", tmp_path / "cancelled"
    args = {"marker": str(marker), "seconds": 600, "started": str(started), "cancelled": str(cancelled)}
    async with proxied(policy, home.path, mode) as p:
        async with anyio.create_task_group() as tg:
            outcome: list[object] = []

            async def call() -> None:
                outcome.append(await p.call_tool("sleep_then_touch", args))

            tg.start_soon(call)
            await await_until(started.exists, 30, "the child to receive the call")
            tg.cancel_scope.cancel()  # the host gives up on the call
        assert outcome == []  # cancelled while the child was still in it
        await await_until(cancelled.exists, 20, "the cancellation to reach the child's handler")
        assert cancelled.read_text() == "cancelled"
        assert not marker.exists()  # the handler was cancelled, not left to finish
        assert not (await p.call_tool("echo", {"value": 1})).is_error  # and the session goes on


@pytest.mark.parametrize("mode", MODES)
async def test_tools_list_changed_reaches_the_host(tmp_path: Path, home: Home, mode: str) -> None:
    policy = write_policy(tmp_path, probe=True, notes=False)
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with proxied(policy, home.path, mode, message_handler=on_message) as p:
        assert "extra" not in {t.name for t in (await p.list_tools()).tools}
        if p.protocol_version == "2026-07-28":
            async with p.listen(tools_list_changed=True):
                await p.call_tool("grow", {})
                with anyio.fail_after(LAST_RESORT):
                    await changed.wait()
        else:
            await p.call_tool("grow", {})
            with anyio.fail_after(LAST_RESORT):
                await changed.wait()
        assert "extra" in {t.name for t in (await p.list_tools()).tools}
        assert text(await p.call_tool("extra", {})) == "extra"


@pytest.mark.parametrize("mode", MODES)
async def test_roots_request_from_the_child_gets_the_workspace(tmp_path: Path, home: Home, mode: str) -> None:
    """Only handshake-era children may send requests (2026-07-28 forbids them), so legacy downstream."""
    policy = write_policy(tmp_path, probe=True, notes=False)
    async with proxied(policy, home.path, mode, proxy_args=("--downstream-mode", "legacy")) as p:
        result = await p.call_tool("roots", {})
        assert not result.is_error, text(result)
        assert result.structured_content == {"result": [(tmp_path / "workspace").as_uri()]}, result
        assert not (await p.call_tool("echo", {"value": "still fine"})).is_error


async def test_changed_definition_is_withheld_until_accepted(tmp_path: Path, home: Home) -> None:
    from click.testing import CliRunner

    from gatekeeper.cli import cli

    async with proxied(write_policy(tmp_path, probe=True, notes=False), home.path) as p:
        assert "shifty" in {t.name for t in (await p.list_tools()).tools}
    changed_policy = write_policy(tmp_path, probe=True, notes=False, probe_env=', PROBE_VARIANT: "2"')
    async with proxied(changed_policy, home.path) as p:
        names = {t.name for t in (await p.list_tools()).tools}
        assert "shifty" not in names and "echo" in names
        refused = await p.call_tool("shifty", {})
        assert refused.is_error and "--accept-changes" in text(refused)
    changes = [json.loads(e[2]) for e in events(home.path, "tool_definition_changed")]
    assert [c["tool"] for c in changes] == ["shifty"]
    result = CliRunner().invoke(cli, ["policy", "check", "--policy", str(changed_policy), "--accept-changes"])
    assert result.exit_code == 0 and "Accepted: probe.shifty" in result.output
    async with proxied(changed_policy, home.path) as p:
        assert text(await p.call_tool("shifty", {})) == "2"


async def test_a_broken_server_does_not_take_the_healthy_servers_tools_away(tmp_path: Path, home: Home) -> None:
    policy = write_policy(tmp_path, probe=True, probe_env=', PROBE_FAIL_START: "1"')
    (tmp_path / "workspace" / "notes" / "a.md").write_text("still readable\n")
    async with proxied(policy, home.path) as p:
        names = {t.name for t in (await p.list_tools()).tools}
        assert {"notes__read_note", "notes__create_note", "gatekeeper_proposal_status"} <= names
        assert not any(name.startswith("probe__") for name in names)
        assert text(await p.call_tool("notes__read_note", {"path": "notes/a.md"})) == "still readable\n"
        # The broken server's tools say why, with its stderr, and the proxy stays up.
        broken = await p.call_tool("probe__echo", {"value": 1})
        assert broken.is_error
        assert "downstream server 'probe' is not available" in text(broken)
        assert "refusing to start (PROBE_FAIL_START is set)" in text(broken)
        assert {"notes__read_note"} <= {t.name for t in (await p.list_tools()).tools}
    assert any(json.loads(e[2])["server"] == "probe" for e in events(home.path, "server_failed"))
    # Recorded once for the two listings: the set of missing servers did not change.
    missing = [json.loads(e[2]) for e in events(home.path, "tools_listed_without")]
    assert [m["servers"] for m in missing] == [["probe"]]
    assert "refusing to start" in (home.path / "proxy-stderr.log").read_text()
    assert "not available" in missing[0]["why"]["probe"]


async def test_missing_command_is_reported(tmp_path: Path, home: Home) -> None:
    policy = tmp_path / "policy.yaml"
    (tmp_path / "ws").mkdir()
    policy.write_text(
        "version: 1\nservers:\n  ghost:\n    command: /nonexistent/mcp-server\n    workspace: ws\n"
        "    tools: {read: allow}\n"
    )
    async with proxied(policy, home.path) as p:
        with pytest.raises(MCPError, match=r"ghost.*not available.*nonexistent"):
            await p.list_tools()


async def test_a_tool_change_as_a_2026_child_is_first_listed_reaches_the_host(tmp_path: Path, home: Home) -> None:
    """A 2026-07-28 child tells only open listen streams about a change: the proxy's stream must be
    acknowledged before it first lists the child's tools, or the host never hears of a change made
    in between. The child starts slowly, so the host's first tools/list is already waiting for it."""
    policy = write_policy(
        tmp_path, probe=True, notes=False, probe_env=', PROBE_GROW_AT_FIRST_LIST: "1", PROBE_START_DELAY: "2"'
    )
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with proxied(policy, home.path, "auto", message_handler=on_message) as p:
        assert p.protocol_version == "2026-07-28"
        async with p.listen(tools_list_changed=True):
            assert "extra" not in {t.name for t in (await p.list_tools()).tools}  # the child's first list
            with anyio.fail_after(LAST_RESORT):
                await changed.wait()
        assert "extra" in {t.name for t in (await p.list_tools()).tools}
        assert text(await p.call_tool("extra", {})) == "extra"
        started = [json.loads(e[2]) for e in events(home.path, "server_started")]
        assert [(e["server"], e["era"]) for e in started] == [("probe", "modern")]  # one life: no restart

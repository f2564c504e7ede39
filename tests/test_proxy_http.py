"""Gatekeeper in front of a real Streamable HTTP server (tests/peers/stateful_http_server.py, the
Python SDK on its streamable-http transport, stateful): allow, propose, deny, a restart of the
server mid-test (its session is gone: a new one, the call retried), a server down and back, and
a header secret from the environment that reaches the server and nothing else."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types

from gatekeeper.home import Home
from tests.helpers import LAST_RESORT, await_until
from tests.http_servers import free_port, proxied, running, start, stop
from tests.proxy_support import events, files_under

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
MODES = ["auto", "legacy"]
SERVER = "tests.peers.stateful_http_server"
TOKEN = "s3cr3t-token-7f4e9a"


def text(result: types.CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


def policy(tmp: Path, port: int, extra: str = "") -> Path:
    workspace = tmp / "vault"
    workspace.mkdir(exist_ok=True)
    (workspace / "hello.md").write_text("# Hello\n")
    body = f"""
    version: 1
    servers:
      vault:
        url: http://127.0.0.1:{port}/mcp
        timeout: 10s
        workspace: {workspace}
        headers: {{Authorization: {{env: VAULT_TOKEN, prefix: "Bearer "}}}}
        tools:
          read_note: allow
          whoami: allow
          wait: allow
          steps: allow
          grow: allow
          extra: allow
          erase_all: deny
          create_note:
            propose:
              path: {{arg: name}}
              content: {{arg: body}}
    """
    path = tmp / "policy.yaml"
    path.write_text(textwrap.dedent(body) + extra)
    return path


def serve(tmp: Path, port: int, *extra: str) -> Any:
    vault = str(tmp / "vault")
    return running(SERVER, vault, "--token-env", "VAULT_TOKEN", *extra, port=port, env={"VAULT_TOKEN": TOKEN})


@pytest.mark.parametrize("stateless", [False, True])
@pytest.mark.parametrize("mode", MODES)
async def test_allow_propose_deny_through_the_http_server(
    tmp_path: Path, home: Home, mode: str, stateless: bool
) -> None:
    port = free_port()
    path = policy(tmp_path, port)
    with serve(tmp_path, port, *(["--stateless"] if stateless else [])):
        async with proxied(path, home.path, {"VAULT_TOKEN": TOKEN}, mode) as p:
            names = {t.name for t in (await p.list_tools()).tools}
            assert {"read_note", "create_note", "whoami"} <= names and "erase_all" not in names
            read = await p.call_tool("read_note", {"name": "hello.md"})
            assert not read.is_error and text(read) == "# Hello\n"
            proposed = await p.call_tool("create_note", {"name": "new.md", "body": "hi"})
            assert "proposal" in json.dumps(proposed.model_dump(mode="json")).lower()
            denied = await p.call_tool("erase_all", {})
            assert denied.is_error
    vault = tmp_path / "vault"
    assert not (vault / "new.md").exists() and not (vault / "ERASED").exists()  # the server's writes never ran
    assert events(home.path, "proposal_created") and events(home.path, "tool_denied")


async def test_the_token_reaches_the_server_and_nothing_else(tmp_path: Path, home: Home) -> None:
    port = free_port()
    path = policy(tmp_path, port)
    with serve(tmp_path, port):
        async with proxied(path, home.path, {"VAULT_TOKEN": TOKEN}) as p:
            assert not (await p.call_tool("whoami", {})).is_error  # the server answers 401 without it
    leaked = [name for name, data in files_under(home.path).items() if TOKEN.encode() in data]
    assert leaked == [], f"the token is written in {leaked}"


async def test_a_missing_token_variable_is_named(tmp_path: Path, home: Home) -> None:
    port = free_port()
    path = policy(tmp_path, port)
    with serve(tmp_path, port):
        async with proxied(path, home.path, {}) as p:
            result = await p.call_tool("whoami", {})
    assert result.is_error and "'vault'" in text(result) and "VAULT_TOKEN" in text(result)
    assert "not set" in text(result)


async def test_a_wrong_token_is_an_error_naming_the_status_and_the_headers(tmp_path: Path, home: Home) -> None:
    port = free_port()
    path = policy(tmp_path, port)
    wrong = "not-the-token-3b1d"
    with serve(tmp_path, port):
        async with proxied(path, home.path, {"VAULT_TOKEN": wrong}) as p:
            result = await p.call_tool("whoami", {})
    assert result.is_error and "'vault'" in text(result), text(result)
    assert "HTTP 401 Unauthorized" in text(result) and "check the headers" in text(result)
    assert "MCPError" not in text(result) and wrong not in text(result)
    assert [n for n, data in files_under(home.path).items() if wrong.encode() in data] == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_restarted_server_gets_a_new_session_and_the_call_works(tmp_path: Path, home: Home, mode: str) -> None:
    port = free_port()
    path = policy(tmp_path, port)
    env = {"VAULT_TOKEN": TOKEN}
    first = start(SERVER, str(tmp_path / "vault"), "--token-env", "VAULT_TOKEN", port=port, env=env)
    try:
        async with proxied(path, home.path, env, mode) as p:
            pid = int(text(await p.call_tool("whoami", {})))
            assert pid == first.pid
            stop(first)
            first = start(SERVER, str(tmp_path / "vault"), "--token-env", "VAULT_TOKEN", port=port, env=env)
            again = await p.call_tool("whoami", {})
            assert not again.is_error, text(again)
            assert int(text(again)) == first.pid
            read = await p.call_tool("read_note", {"name": "hello.md"})
            assert text(read) == "# Hello\n"
    finally:
        stop(first)
    if mode == "legacy":  # 2025-11-25 has sessions (Mcp-Session-Id); 2026-07-28 has none to lose
        assert len(events(home.path, "server_started")) >= 2
        assert "ended our session" in (home.path / "logs" / "vault.log").read_text()


async def test_a_server_down_gives_a_tool_error_then_comes_back(tmp_path: Path, home: Home) -> None:
    port = free_port()
    path = policy(tmp_path, port)
    env = {"VAULT_TOKEN": TOKEN}
    async with proxied(path, home.path, env) as p:
        down = await p.call_tool("whoami", {})
        assert down.is_error and "'vault'" in text(down), text(down)
        assert f"127.0.0.1 (127.0.0.1) port {port}" in text(down)
        with serve(tmp_path, port) as server:
            back = await _until_ok(p, "whoami")
            assert int(text(back)) == server.pid
    log = (home.path / "logs" / "vault.log").read_text()
    assert "connecting to" in log and TOKEN not in log
    assert events(home.path, "server_failed")


async def _until_ok(p: Client, tool: str, budget: float = 40) -> types.CallToolResult:
    """Call until the proxy's backoff lets a start through (a poll; bounded: BACKOFF_MAX is 30 s)."""
    deadline = time.monotonic() + budget
    while True:
        result = await p.call_tool(tool, {})
        if not result.is_error or time.monotonic() > deadline:
            assert not result.is_error, text(result)
            return result
        assert "next attempt in" in text(result) or "could not be reached" in text(result), text(result)
        await anyio.sleep(0.2)


@pytest.mark.parametrize("mode", MODES)
async def test_progress_logs_and_list_changed_come_through(tmp_path: Path, home: Home, mode: str) -> None:
    """Server-initiated messages: progress and logs on the call's event stream, list_changed on the
    optional GET stream (2025) or the listen stream (2026)."""
    port = free_port()
    progress: list[tuple[float, float | None]] = []
    logs: list[str] = []
    changed = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total))

    async def on_log(params: Any) -> None:
        logs.append(str(params.data))

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    kw: dict[str, Any] = {"logging_callback": on_log, "log_level": "debug", "message_handler": on_message}
    with serve(tmp_path, port):
        async with proxied(policy(tmp_path, port), home.path, {"VAULT_TOKEN": TOKEN}, mode, **kw) as p:
            result = await p.call_tool("steps", {"n": 3}, progress_callback=on_progress)
            assert not result.is_error, text(result)
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
            assert text(await p.call_tool("extra", {})) == "extra"
    assert progress == [(1, 3), (2, 3), (3, 3)]
    assert logs == ["log line 1", "log line 2", "log line 3"]


@pytest.mark.parametrize("mode", MODES)
async def test_cancellation_reaches_the_http_server(tmp_path: Path, home: Home, mode: str) -> None:
    port = free_port()
    started, cancelled = tmp_path / "started", tmp_path / "cancelled"
    args = {"seconds": 600, "started": str(started), "cancelled": str(cancelled)}
    with serve(tmp_path, port):
        async with proxied(policy(tmp_path, port), home.path, {"VAULT_TOKEN": TOKEN}, mode) as p:
            outcome: list[object] = []
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    outcome.append(await p.call_tool("wait", args))

                tg.start_soon(call)
                await await_until(started.exists, 30, "the server to receive the call")
                tg.cancel_scope.cancel()  # the host gives up on the call
            assert outcome == []
            await await_until(cancelled.exists, 20, "the cancellation to reach the server's handler")
            assert not (await p.call_tool("whoami", {})).is_error  # and the connection goes on

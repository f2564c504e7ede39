"""Our JSON-RPC client toward stdio children (proxy/servers/stdio/rpc.py, negotiate.py) against real servers,
compared with what the SDK client gets from the same server: the handshake's outcome, listings,
call results, the answers to the child's own requests; and a child dying mid-call, cancellation
reaching the child's handler, progress, logs, roots and list_changed in both eras."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters, types

from gatekeeper.proxy.protocol import mcp as w
from gatekeeper.proxy.protocol.rpc import RpcError
from gatekeeper.proxy.servers.stdio.handshake import CAPABILITIES, CLIENT_INFO
from gatekeeper.proxy.servers.stdio.rpc import ChildSession
from gatekeeper.proxy.tooldef import tool_dump
from tests.childrpc_support import dump, lean, peer, roots_of, sdk
from tests.helpers import LAST_RESORT, await_until
from tests.peers.external import PEERS
from tests.proxy_support import PY

pytestmark = pytest.mark.anyio
MODES = ["auto", "legacy"]
CASES = [(name, mode) for name in ("notes", "probe", "fs", "git") for mode in MODES] + [("old", "legacy")]


def a_call(name: str, tmp: Path) -> tuple[str, dict[str, Any]]:
    """One read-only call each server answers the same way twice."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {
        "notes": ("read_note", {"path": "notes/seed.md"}),
        "probe": ("echo", {"value": [1, "two", None]}),
        "fs": ("read_text_file", {"path": str(tmp / "workspace" / "notes" / "seed.md")}),
        "git": ("git_status", {"repo_path": str(tmp / "repo")}),
        "old": ("read_note", {"path": "notes/seed.md"}),
    }
    return calls[name]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "mode"), CASES)
async def test_handshake_listing_and_a_call_match_the_sdk_client(tmp_path: Path, name: str, mode: str) -> None:
    params = peer(name, tmp_path)
    tool, args = a_call(name, tmp_path)
    async with sdk(params, tmp_path, mode) as client:
        expected = {
            "version": client.protocol_version,
            "capabilities": dump(client.server_capabilities),
            "info": dump(client.server_info),
            "instructions": client.session.instructions,
            "tools": [dump(t) for t in (await client.list_tools()).tools],
            "call": dump(await client.call_tool(tool, args)),
        }
    async with lean(params, tmp_path, mode) as (session, negotiated, _):
        listing = await session.request("tools/list")
        raw_call = await session.request("tools/call", {"name": tool, "arguments": args})
    assert negotiated.protocol_version == expected["version"]
    assert dump(types.ServerCapabilities.model_validate(negotiated.server_capabilities)) == expected["capabilities"]
    assert negotiated.server_info is not None
    assert dump(types.Implementation.model_validate(negotiated.server_info)) == expected["info"]
    assert negotiated.instructions == expected["instructions"]
    assert [tool_dump(t, negotiated.protocol_version) for t in listing["tools"]] == expected["tools"]
    assert "nextCursor" not in listing
    assert dump(types.CallToolResult.model_validate(raw_call)) == expected["call"]
    assert raw_call["content"] == expected["call"]["content"]  # the child's own bytes, not a model's


@pytest.mark.slow
async def test_the_old_sdk_server_dies_on_the_probe_as_with_the_sdk_client(tmp_path: Path) -> None:
    """A 1.x-SDK server fails on server/discover; the probe times out, initialize follows, and the
    server has closed: -32000, the same error the SDK client raises (Downstream then restarts it)."""
    params = peer("old", tmp_path)
    with pytest.raises(BaseException) as caught:
        async with lean(params, tmp_path, "auto"):
            pytest.fail("the 1.x server came up on the probe")
    error = caught.value
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]  # the task groups' wrapping, as Downstream unwraps it
    assert isinstance(error, RpcError), repr(error)
    assert (error.code, error.message) == (w.CONNECTION_CLOSED, "Connection closed")
    assert "server/discover" in (tmp_path / "child-stderr.log").read_text()


def _probe(tmp: Path) -> StdioServerParameters:
    return peer("probe", tmp)


@pytest.mark.parametrize("mode", MODES)
async def test_a_child_dying_mid_call_fails_every_pending_request(tmp_path: Path, mode: str) -> None:
    files = {k: str(tmp_path / k) for k in ("marker", "started")}
    async with lean(_probe(tmp_path), tmp_path, mode) as (session, _, process):
        outcomes: list[BaseException] = []

        async def slow() -> None:
            try:
                await session.request(
                    "tools/call", {"name": "sleep_then_touch", "arguments": {**files, "seconds": 600}}
                )
            except RpcError as exc:
                outcomes.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            await await_until(Path(files["started"]).exists, 30, "the child to start the slow call")
            with pytest.raises(RpcError) as died, anyio.fail_after(LAST_RESORT):
                await session.request("tools/call", {"name": "die", "arguments": {}})
        assert (died.value.code, died.value.message) == (-32000, "Connection closed")
        assert [(e.code, str(e)) for e in outcomes if isinstance(e, RpcError)] == [(-32000, "Connection closed")]
        with pytest.raises(RpcError) as later:  # and every later request, at once
            await session.request("tools/list")
        assert later.value.code == -32000
        await await_until(lambda: process.returncode is not None, 10, "the child to be gone")


@pytest.mark.parametrize("mode", MODES)
async def test_cancellation_reaches_the_child(tmp_path: Path, mode: str) -> None:
    files = {k: str(tmp_path / k) for k in ("marker", "started", "cancelled")}
    async with lean(_probe(tmp_path), tmp_path, mode) as (session, _, _process):
        outcome: list[object] = []
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                args = {**files, "seconds": 600}
                outcome.append(await session.request("tools/call", {"name": "sleep_then_touch", "arguments": args}))

            tg.start_soon(call)
            await await_until(Path(files["started"]).exists, 30, "the child to receive the call")
            tg.cancel_scope.cancel()
        assert outcome == []
        await await_until(Path(files["cancelled"]).exists, 20, "the cancellation to reach the child's handler")
        assert not Path(files["marker"]).exists()
        echoed = await session.request("tools/call", {"name": "echo", "arguments": {"value": 1}})
        assert echoed["structuredContent"] == {"value": 1}  # the session goes on


@pytest.mark.parametrize("mode", MODES)
async def test_a_timeout_is_32001_and_cancels_the_childs_handler(tmp_path: Path, mode: str) -> None:
    files = {k: str(tmp_path / k) for k in ("marker", "started", "cancelled")}
    async with lean(_probe(tmp_path), tmp_path, mode) as (session, _, _process):
        with pytest.raises(RpcError) as caught:
            args = {**files, "seconds": 600}
            await session.request("tools/call", {"name": "sleep_then_touch", "arguments": args}, timeout=1.0)
        assert (caught.value.code, caught.value.message) == (-32001, "Request 'tools/call' timed out")
        await await_until(Path(files["cancelled"]).exists, 20, "the cancellation to reach the child's handler")


@pytest.mark.parametrize("mode", MODES)
async def test_progress_and_logs_reach_their_callbacks(tmp_path: Path, mode: str) -> None:
    logs: list[dict[str, Any]] = []
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_log(params: dict[str, Any]) -> None:
        logs.append(params)

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with lean(_probe(tmp_path), tmp_path, mode, on_log=on_log) as (session, negotiated, _):
        result = await session.request("tools/call", {"name": "steps", "arguments": {"n": 3}}, on_progress=on_progress)
        assert result["content"][0]["text"] == "3"
        await await_until(lambda: len(logs) == 3 and len(progress) == 3, 10, "three log lines and three reports")
        opted = await session.request("tools/call", {"name": "log_opt_in", "arguments": {}})
    assert sorted(progress) == [(float(i), 3.0, f"step {i}") for i in (1, 2, 3)]
    assert sorted(line["data"] for line in logs) == ["log line 1", "log line 2", "log line 3"]
    assert {line["level"] for line in logs} == {"info"}
    # A 2026 child is asked for every level, as the SDK client the proxy used asked for ``debug``.
    assert opted["content"][0]["text"] == ("debug" if negotiated.modern else "none")


async def test_roots_list_gets_the_workspace_on_a_handshake_era_child(tmp_path: Path) -> None:
    async with lean(_probe(tmp_path), tmp_path, "legacy") as (session, _, _process):
        result = await session.request("tools/call", {"name": "roots", "arguments": {}})
    assert result["structuredContent"]["result"] == [(tmp_path / "workspace").as_uri()]


@pytest.mark.parametrize("mode", MODES)
async def test_list_changed_reaches_on_notify_once(tmp_path: Path, mode: str) -> None:
    notes: list[tuple[str, dict[str, Any]]] = []

    async def on_notify(method: str, params: dict[str, Any]) -> None:
        notes.append((method, params))

    async with lean(_probe(tmp_path), tmp_path, mode, on_notify=on_notify) as (session, negotiated, _):
        async with anyio.create_task_group() as tg:
            if negotiated.modern:  # a 2026 child sends list_changed only on an open listen stream
                acked = anyio.Event()
                tg.start_soon(session.listen, {"toolsListChanged": True}, acked)
                with anyio.fail_after(LAST_RESORT):
                    await acked.wait()
            await session.request("tools/call", {"name": "grow", "arguments": {}})
            await await_until(lambda: notes, 10, "list_changed from the child")
            await session.request("tools/call", {"name": "echo", "arguments": {}})  # a round trip for any duplicate
            tg.cancel_scope.cancel()
        listing = await session.request("tools/list")
    assert [method for method, _ in notes] == ["notifications/tools/list_changed"]
    assert "extra" in {t["name"] for t in listing["tools"]}


def _asker(tmp: Path, log: Path, refuse: str = "") -> StdioServerParameters:
    env = {"ASK_LOG": str(log), "ASK_REFUSE": refuse}
    return StdioServerParameters(command=PY, args=[str(PEERS / "asking_server.py")], env=env)


def _answers(log: Path) -> dict[Any, Any]:
    """The asking server's log: our answers to its requests, by id."""
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return {m["id"]: m for m in lines if "method" not in m}


@pytest.mark.parametrize("mode", MODES)
async def test_the_childs_requests_and_junk_lines_get_what_the_sdk_client_gives(
    tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """ping, roots/list, sampling and elicitation (refused with the SDK's words, -32602 for
    malformed params) and an unknown method, answered as the SDK client answers the same server;
    on a 2026 connection all of them are -32601. Junk on the child's stdout is logged and skipped."""
    ours, theirs = tmp_path / "ours.log", tmp_path / "theirs.log"
    async with sdk(_asker(tmp_path, theirs), tmp_path, mode) as client:
        await client.call_tool("hello", {})
        await await_until(lambda: len(_answers(theirs)) == 6, 10, "the SDK client's six answers")
    with caplog.at_level(logging.WARNING, logger="gatekeeper.proxy"):
        async with lean(_asker(tmp_path, ours), tmp_path, mode) as (session, negotiated, _):
            assert (await session.request("tools/call", {"name": "hello"}))["content"][0]["text"] == "hello"
            await await_until(lambda: len(_answers(ours)) == 6, 10, "our six answers")
    assert _answers(ours) == _answers(theirs)
    if negotiated.modern:
        assert {a["error"]["code"] for a in _answers(ours).values()} == {-32601}
    else:
        assert _answers(ours)["p"]["result"] == {} and _answers(ours)[0]["result"] == roots_of(tmp_path)
    skipped = [r.getMessage() for r in caplog.records if "skipped a line" in r.getMessage()]
    assert len(skipped) == 3 and "junk before the protocol" in skipped[0]


async def test_handshake_requests_are_the_sdk_clients(tmp_path: Path) -> None:
    """What we send in the handshake, byte for byte in meaning, as the SDK client sends it."""
    ours, theirs = tmp_path / "ours.log", tmp_path / "theirs.log"
    for mode in MODES:
        async with sdk(_asker(tmp_path, theirs), tmp_path, mode):
            pass
        async with lean(_asker(tmp_path, ours), tmp_path, mode):
            pass
    sent = [json.loads(line) for line in ours.read_text().splitlines()]
    assert sent == [json.loads(line) for line in theirs.read_text().splitlines()]
    assert sent[0]["params"]["_meta"][w.CLIENT_INFO_META_KEY] == CLIENT_INFO
    assert sent[-2]["params"]["capabilities"] == CAPABILITIES


async def test_requests_after_stdout_ends_fail_at_once() -> None:
    """No child at all: a session whose stdout ended answers -32000 without writing."""
    written: list[bytes] = []

    async def send(data: bytes) -> None:
        written.append(data)

    session = ChildSession(send)
    session.end()
    with pytest.raises(RpcError) as caught:
        await session.request("tools/list")
    assert caught.value.code == -32000 and written == []


async def test_integers_past_64_bits_stay_exact_as_with_the_sdk_client(tmp_path: Path) -> None:
    """orjson turns 12345678901234567890123 into a float without a word; the SDK client keeps it."""
    params = StdioServerParameters(
        command=PY, args=[str(PEERS / "raw_server.py")], env={"RAW_LOG": str(tmp_path / "raw.log")}
    )
    async with sdk(params, tmp_path, "legacy") as client:
        expected = dump(await client.call_tool("odd", {}))
    async with lean(params, tmp_path, "legacy") as (session, _, _process):
        result = await session.request("tools/call", {"name": "odd", "arguments": {}})
    assert result["_meta"]["big"] == 12345678901234567890123 == expected["_meta"]["big"]
    assert isinstance(result["_meta"]["big"], int) and result["_meta"]["n"] == 1.5


@pytest.mark.parametrize("refuse", ["discover", "initialize"])
async def test_a_32022_means_one_probe_again_as_with_the_sdk_client(tmp_path: Path, refuse: str) -> None:
    """-32022 naming a mutual version, to the probe or to the fallback initialize: one more probe at
    it, and the child is spoken to in 2026-07-28; the same lines as the SDK client sends."""
    ours, theirs = tmp_path / "ours.log", tmp_path / "theirs.log"
    async with sdk(_asker(tmp_path, theirs, refuse), tmp_path, "auto") as client:
        expected = client.protocol_version
    async with lean(_asker(tmp_path, ours, refuse), tmp_path, "auto") as (_, negotiated, _process):
        pass
    assert negotiated.protocol_version == expected == "2026-07-28"
    sent = [json.loads(line) for line in ours.read_text().splitlines()]
    assert sent == [json.loads(line) for line in theirs.read_text().splitlines()]
    methods = [m["method"] for m in sent]
    assert methods == (
        ["server/discover"] * 2 if refuse == "discover" else ["server/discover", "initialize", "server/discover"]
    )

"""proxy/host/dispatch.py, the host dispatcher's core, over in-memory streams with real anyio tasks: one task per
request, inline initialize, cancellation by id (never answered), -32000 at the end of input, error mapping.
Every wait is on an event with a deadline, never a sleep."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from gatekeeper.proxy.host.dispatch import HostRpc, Request
from gatekeeper.proxy.protocol.rpc import RpcError
from tests.helpers import LAST_RESORT, patience

pytestmark = pytest.mark.anyio
Message = dict[str, Any]


class Outbox:
    """What the dispatcher sent, and a way to wait for a message that matches."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self._changed = anyio.Event()

    async def send(self, message: Message) -> None:
        self.sent.append(message)
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, matches: Callable[[Message], bool], timeout: float = 5) -> Message:
        with anyio.fail_after(patience(timeout)):
            while True:
                found = next((m for m in self.sent if matches(m)), None)
                if found is not None:
                    return found
                await self._changed.wait()

    def answers(self) -> list[Any]:
        return [m["id"] for m in self.sent if "method" not in m]


def answer_to(rid: Any) -> Callable[[Message], bool]:
    return lambda m: "method" not in m and m.get("id") == rid and type(m["id"]) is type(rid)


def call(rid: Any, method: str, params: Message | None = None) -> Message:
    message: Message = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


def cancelled(rid: Any) -> Message:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": "test"}}


class Handlers:
    """Request handlers a test steers: ``gates[name]`` holds a request until the test opens it."""

    def __init__(self) -> None:
        self.gates: dict[str, anyio.Event] = {}
        self.started: dict[str, anyio.Event] = {}
        self.finished: dict[str, anyio.Event] = {}
        self.ended: list[str] = []
        self.notified: list[tuple[str, Any]] = []

    def gate(self, name: str) -> anyio.Event:
        self.started.setdefault(name, anyio.Event())
        self.finished.setdefault(name, anyio.Event())
        return self.gates.setdefault(name, anyio.Event())

    async def on_request(self, request: Request) -> Message:
        name = (request.params or {}).get("name", request.method)
        if name in self.gates:
            self.started[name].set()
            try:
                await self.gates[name].wait()
            finally:
                self.ended.append(name)
                self.finished[name].set()
        if name == "boom":
            raise ValueError("a secret internal detail")
        if name == "refuse":
            raise RpcError(-32602, "invalid params for tools/call: params.name: Field required", {"why": 1})
        if name == "progress":
            await request.progress(1, 2, "half")
        return {} if request.method == "ping" else {"echo": name}

    async def on_notify(self, method: str, params: Any) -> None:
        self.notified.append((method, params))
        if method == "notifications/explode":
            raise RuntimeError("a broken notification handler")


@asynccontextmanager
async def dispatcher() -> AsyncIterator[tuple[Callable[[Message], Awaitable[None]], Outbox, Handlers, anyio.Event]]:
    """A running ``HostRpc``: yields (send a host message, outbox, handlers, input ended and served)."""
    outbox, handlers, done = Outbox(), Handlers(), anyio.Event()
    to_rpc, from_host = anyio.create_memory_object_stream[Message](16)
    rpc = HostRpc(outbox.send, handlers.on_request, handlers.on_notify)

    async def serve() -> None:
        async with from_host:
            await rpc.serve(from_host)
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        async with to_rpc:
            yield to_rpc.send, outbox, handlers, done
        with anyio.fail_after(LAST_RESORT):
            await done.wait()


async def test_a_slow_request_does_not_hold_up_the_next() -> None:
    async with dispatcher() as (send, outbox, handlers, _):
        slow = handlers.gate("slow")
        await send(call(1, "tools/call", {"name": "slow"}))
        await send(call(2, "ping"))
        assert await outbox.wait_for(answer_to(2)) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        slow.set()
        await outbox.wait_for(answer_to(1))
    assert outbox.answers() == [2, 1]


async def test_initialize_is_answered_before_anything_after_it_is_dispatched() -> None:
    async with dispatcher() as (send, outbox, handlers, _):
        init = handlers.gate("initialize")
        await send(call("init", "initialize"))
        await send(call("next", "ping"))  # pipelined: waits behind initialize, although it is instant
        with anyio.fail_after(LAST_RESORT):
            await handlers.started["initialize"].wait()
        assert outbox.sent == []
        init.set()
        await outbox.wait_for(answer_to("next"))
    assert outbox.answers() == ["init", "next"]


async def test_a_cancelled_request_is_stopped_and_never_answered() -> None:
    async with dispatcher() as (send, outbox, handlers, _):
        handlers.gate("slow")
        await send(call(7, "tools/call", {"name": "slow"}))
        with anyio.fail_after(LAST_RESORT):
            await handlers.started["slow"].wait()
        await send(cancelled("7"))  # a stringified id correlates, as in the SDK
        await send(call(8, "ping"))
        await outbox.wait_for(answer_to(8))
        assert handlers.ended == ["slow"]  # its handler was cancelled, not left running
        assert ("notifications/cancelled", cancelled("7")["params"]) in handlers.notified  # and teed on
    assert outbox.answers() == [8]


async def test_cancelling_an_unknown_or_invalid_id_changes_nothing() -> None:
    async with dispatcher() as (send, outbox, handlers, _):
        gate = handlers.gate("slow")
        await send(call(1, "tools/call", {"name": "slow"}))
        for rid in (99, True, None, 1.0):
            await send(cancelled(rid))
        gate.set()
        await outbox.wait_for(answer_to(1))


async def test_errors_are_mapped_and_internals_never_leak() -> None:
    async with dispatcher() as (send, outbox, _, _done):
        await send(call(1, "tools/call", {"name": "refuse"}))
        await send(call(2, "tools/call", {"name": "boom"}))
        refused, failed = await outbox.wait_for(answer_to(1)), await outbox.wait_for(answer_to(2))
    assert refused["error"] == {
        "code": -32602,
        "message": "invalid params for tools/call: params.name: Field required",
        "data": {"why": 1},
    }
    assert failed["error"] == {
        "code": -32603,
        "message": "Gatekeeper internal error in tools/call; details are in its log",
    }


async def test_the_end_of_input_answers_what_is_in_flight_with_connection_closed() -> None:
    async with dispatcher() as (send, outbox, handlers, done):
        handlers.gate("a")
        handlers.gate("b")
        await send(call("a", "tools/call", {"name": "a"}))
        await send(call("b", "tools/call", {"name": "b"}))
        with anyio.fail_after(LAST_RESORT):
            await handlers.started["a"].wait()
            await handlers.started["b"].wait()
        await send(cancelled("b"))  # the host gave up on b: it gets nothing, even now
        with anyio.fail_after(LAST_RESORT):
            await handlers.finished["b"].wait()
    assert done.is_set()
    assert outbox.sent == [{"jsonrpc": "2.0", "id": "a", "error": {"code": -32000, "message": "Connection closed"}}]
    assert sorted(handlers.ended) == ["a", "b"]


async def test_a_duplicate_id_in_flight_is_answered_twice() -> None:
    async with dispatcher() as (send, outbox, handlers, _):
        gate = handlers.gate("slow")
        await send(call(5, "tools/call", {"name": "slow"}))
        await send(call(5, "ping"))
        await outbox.wait_for(answer_to(5))
        gate.set()
        await outbox.wait_for(lambda m: m.get("result") == {"echo": "slow"})
    assert outbox.answers() == [5, 5]


async def test_progress_goes_to_the_hosts_token_and_only_with_one() -> None:
    async with dispatcher() as (send, outbox, _, _done):
        await send(call(1, "tools/call", {"name": "progress", "_meta": {"progressToken": "t1"}}))
        await send(call(2, "tools/call", {"name": "progress", "_meta": {"progressToken": True}}))
        await outbox.wait_for(answer_to(1))
        await outbox.wait_for(answer_to(2))
    progress = [m for m in outbox.sent if m.get("method") == "notifications/progress"]
    assert progress == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "t1", "progress": 1, "total": 2, "message": "half"},
        }
    ]
    assert outbox.sent.index(progress[0]) < outbox.sent.index(sent_answer(outbox, 1))  # before its answer


def sent_answer(outbox: Outbox, rid: Any) -> Message:
    return next(m for m in outbox.sent if answer_to(rid)(m))


async def test_responses_are_dropped_and_a_failing_notification_handler_is_not_fatal() -> None:
    async with dispatcher() as (send, outbox, handlers, _):
        await send({"jsonrpc": "2.0", "id": 1, "result": {}})
        await send({"jsonrpc": "2.0", "method": "notifications/explode"})
        await send(call(2, "ping"))
        await outbox.wait_for(answer_to(2))
    assert outbox.answers() == [2]
    assert handlers.notified == [("notifications/explode", None)]


# -- the same scripts against the SDK's own server: what hostrpc copies ------------------------------------

HELLO = call("init", "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}})
OPENING = [HELLO, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call(1, "tools/call", {"name": "slow"})]
SCRIPTS = {
    "cancel-then-ping": [cancelled(1), call(2, "ping")],
    "end-of-input-while-in-flight": [],
    "duplicate-id-then-end-of-input": [call(1, "ping")],
    "cancel-by-stringified-id": [cancelled("1"), call(2, "ping")],
}


async def sdk_transcript(script: list[Message]) -> list[Message]:
    """What a real SDK server writes for ``OPENING`` (its tools/call waits until cancelled), then
    ``script`` once that call runs, then the end of input (after the last request's answer)."""
    import mcp_types as types
    from mcp.server import Server
    from mcp.shared.message import SessionMessage

    started, outbox = anyio.Event(), Outbox()

    async def hold(ctx: Any, params: Any) -> Any:
        started.set()
        await anyio.sleep_forever()

    server: Server[Any] = Server("oracle", on_call_tool=hold)
    to_server, server_in = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    server_out, from_server = anyio.create_memory_object_stream[SessionMessage](16)

    async def collect() -> None:
        async with from_server:
            async for sent in from_server:
                await outbox.send(sent.message.model_dump(by_alias=True, mode="json", exclude_unset=True))

    async def feed(messages: list[Message]) -> None:
        for message in messages:
            await to_server.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))

    with anyio.fail_after(LAST_RESORT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.run, server_in, server_out, server.create_initialization_options())
            tg.start_soon(collect)
            async with to_server:
                await feed(OPENING)
                await started.wait()
                await feed(script)
                if script:
                    await outbox.wait_for(answer_to(script[-1]["id"]))
    return [m for m in outbox.sent if m.get("id") != "init"]


async def our_transcript(script: list[Message]) -> list[Message]:
    async with dispatcher() as (send, outbox, handlers, _):
        handlers.gate("slow")
        for message in OPENING:
            await send(message)
        with anyio.fail_after(LAST_RESORT):
            await handlers.started["slow"].wait()
        for message in script:
            await send(message)
        if script:
            await outbox.wait_for(answer_to(script[-1]["id"]))
    return [m for m in outbox.sent if m.get("id") != "init"]


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_cancellation_and_the_end_of_input_are_what_the_sdk_server_does(name: str) -> None:
    ours = await our_transcript(SCRIPTS[name])
    assert ours == await sdk_transcript(SCRIPTS[name])
    if name.startswith("end"):
        assert ours == [{"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "Connection closed"}}]

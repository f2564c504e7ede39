"""Our own JSON-RPC client toward a stdio child: ids, the pending table, the child's own requests.

Why not the SDK's ``Client``: importing it costs ~1 s and ~40 MiB before the proxy can talk to a
child, and it parses every line into pydantic models and validates every result, which the host
does again anyway (issue 12). This session keeps the SDK client's wire behaviour (facts in the
session 6 plan, section 2, "Client side"): integer ids from 1 (the fast path's ``gatekeeper-fast-N``
and the listen ids ``listen-N`` stay disjoint), a caller that gives up sends
``notifications/cancelled``, stdout EOF fails every pending request with -32000 "Connection
closed", junk lines are logged and skipped, and the child's own requests get the SDK's answers.
Results come back as the raw dicts the child sent, unvalidated.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from itertools import count
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc

from gatekeeper.proxy.protocol import mcp as w
from gatekeeper.proxy.protocol.lines import dumps, kind, loads, request_id
from gatekeeper.proxy.protocol.rpc import (
    Json,
    RpcError,  # one JSON-RPC error, both ways: a child's passes on as it is
)

__all__ = ["CLOSED", "ChildSession", "Lines", "RpcError", "serving"]

if TYPE_CHECKING:
    from gatekeeper.proxy.servers.stdio.process import ChildPipe

log = logging.getLogger("gatekeeper.proxy")

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
Notify = Callable[[str, Json], Awaitable[None]]
OnLog = Callable[[Json], Awaitable[None]]
Roots = Callable[[], Awaitable[Json]]
CLOSED = "Connection closed"
_CANCEL_WRITE = 5.0  # as the SDK: a wedged pipe must not hold a cancelled caller forever
_LISTEN_ACK = "notifications/subscriptions/acknowledged"


class Lines(Protocol):
    """The child's stdout as proxy/servers/stdio/process.py's ``_ChildOut`` offers it."""

    refused: str | None  # why the output was cut off, if it was (a line over the cap)

    async def next_line(self) -> bytes | None: ...

    def done(self) -> None: ...


@dataclass
class _Pending:
    progress: Progress | None
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: Json | RpcError | None = None


class ChildSession:
    """One life of a child's connection: requests out, answers and notifications in.

    ``on_log`` hears ``notifications/message`` params; ``on_notify`` every other notification
    (``*/list_changed`` among them) except progress (to its request's callback), cancellation and
    the acknowledgement of our own listen stream. ``roots`` answers a handshake-era ``roots/list``.
    """

    def __init__(
        self,
        send: Callable[[bytes], Awaitable[None]],
        *,
        name: str = "child",
        on_log: OnLog | None = None,
        on_notify: Notify | None = None,
        roots: Roots | None = None,
    ) -> None:
        self.name = name
        self._send = send
        self._on_log, self._on_notify, self._roots = on_log, on_notify, roots
        self._ids = count(1)
        self._listen_ids = count(1)
        self._pending: dict[int | str, _Pending] = {}
        self._listens: dict[str, anyio.Event | None] = {}  # our open listen streams, their ack
        self._tg: anyio.abc.TaskGroup | None = None
        self.closed = False
        self.version: str | None = None  # the negotiated revision (proxy/servers/stdio/handshake.py sets it)
        self.stamp: Callable[[Json], None] | None = None  # a 2026 child's envelope, put on each request

    # -- out ----------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Json | None = None,
        *,
        on_progress: Progress | None = None,
        timeout: float | None = None,
        cancellable: bool = True,
        rid: int | str | None = None,
    ) -> Json:
        """Send one request and wait for its raw result; ``RpcError`` for an error answer, a timeout
        (-32001) or the child's end (-32000). A caller cancelled after the write tells the child."""
        if self.closed:
            raise RpcError(w.CONNECTION_CLOSED, CLOSED)
        rid = next(self._ids) if rid is None else rid
        message = self._message(method, params, rid, on_progress is not None)
        key = request_id(rid)
        assert key is not None
        pending = self._pending[key] = _Pending(on_progress)
        written = False
        try:
            with anyio.move_on_after(timeout if timeout is not None else float("inf")) as clock:
                written = True
                await self._write(message)
                await pending.done.wait()
            if clock.cancelled_caught:
                if cancellable:
                    await self._cancel(rid, f"timed out after {timeout}s", shield=False)
                raise RpcError(w.REQUEST_TIMEOUT, f"Request {method!r} timed out")
        except anyio.get_cancelled_exc_class():
            if cancellable and written and not self.closed:
                await self._cancel(rid, "caller cancelled", shield=True)
            raise
        finally:
            self._pending.pop(key, None)
        outcome = pending.outcome
        if isinstance(outcome, RpcError):
            raise outcome
        assert outcome is not None
        return outcome

    def _message(self, method: str, params: Json | None, rid: int | str | None, progress: bool) -> Json:
        """The wire message, as the SDK builds it: stamped, the id doubling as progress token, and
        no ``params`` at all when they are empty (JSON-RPC forbids ``null``)."""
        message: Json = {"jsonrpc": w.JSONRPC_VERSION}
        if rid is not None:
            message["id"] = rid
        message["method"] = method
        message["params"] = dict(params) if params else {}
        if self.stamp is not None:
            self.stamp(message)
        out = message["params"]
        meta = dict(out.get("_meta") or {})
        if progress:
            meta["progressToken"] = rid
        if meta:
            out["_meta"] = meta
        else:
            out.pop("_meta", None)
        if not out:
            del message["params"]
        return message

    async def notify(self, method: str, params: Json | None = None) -> None:
        """A notification; dropped (not raised) once the child is gone, as the SDK does."""
        if not self.closed:
            await self._write(self._message(method, params, None, False))

    async def listen(self, notifications: Json, acked: anyio.Event | None = None) -> Json:
        """Hold a 2026 ``subscriptions/listen`` open (the child sends ``list_changed`` only on one);
        its acknowledgement is ours (``acked`` is set), its events reach ``on_notify`` like any
        notification, once. Returns when the child closes the stream gracefully."""
        rid = f"listen-{next(self._listen_ids)}"
        self._listens[rid] = acked
        try:
            return await self.request("subscriptions/listen", {"notifications": notifications}, rid=rid)
        finally:
            self._listens.pop(rid, None)

    async def _cancel(self, rid: int | str, reason: str, *, shield: bool) -> None:
        with anyio.move_on_after(_CANCEL_WRITE, shield=shield):
            cancel = {"requestId": rid, "reason": reason}
            await self._write_quietly({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})

    async def _write(self, message: Json) -> None:
        try:
            await self._send(dumps(message))
        except (OSError, RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.end()
            raise RpcError(w.CONNECTION_CLOSED, CLOSED) from None

    async def _write_quietly(self, message: Json) -> None:
        try:
            await self._write(message)
        except RpcError:
            log.debug("%s: dropped %s, the child is gone", self.name, message.get("method"))

    # -- in -----------------------------------------------------------------------------------

    async def read(self, out: Lines, pipe: ChildPipe | None = None) -> None:
        """Take the child's lines until its stdout ends (the fast path's tap sees each one first),
        then fail whatever is still pending."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                while (line := await out.next_line()) is not None:
                    try:
                        line = line.rstrip(b"\r")
                        if pipe is None or not pipe.offer(line):
                            self.feed(line)
                    finally:
                        out.done()
                tg.cancel_scope.cancel()
        finally:
            self._tg = None
            self.end(out.refused)
            if pipe is not None:
                pipe.ended(out.refused)

    def end(self, why: str | None = None) -> None:
        """The child is gone: every pending request fails with -32000 (saying ``why``, if we cut it
        off), and so does every later one."""
        self.closed = True
        message = CLOSED if why is None else f"{CLOSED}: {why}"
        for pending in self._pending.values():
            if pending.outcome is None:
                pending.outcome = RpcError(w.CONNECTION_CLOSED, message)
                pending.done.set()

    def feed(self, line: bytes) -> None:
        """One line from the child: an answer, a request of its own, a notification, or junk."""
        if not line.strip():
            return
        try:
            message = loads(line)
        except ValueError as exc:
            log.warning("%s: skipped a line that is not JSON (%s): %.200r", self.name, exc, line)
            return
        what = kind(message)
        if what == "response":
            self._resolve(message)
        elif what == "request":
            self._spawn(self._answer, message)
        elif what == "notification":
            self._notification(message["method"], message.get("params") or {})
        else:
            log.warning("%s: skipped a line that is not JSON-RPC: %.200r", self.name, line)

    def _resolve(self, message: Json) -> None:
        key = request_id(message.get("id"))
        pending = self._pending.get(key) if key is not None else None
        if pending is None or pending.outcome is not None:
            log.debug("%s: dropped an answer to unknown or late request %r", self.name, message.get("id"))
            return
        if "error" in message:
            error = message["error"]
            pending.outcome = RpcError(error["code"], error["message"], error.get("data"))
        else:
            pending.outcome = message["result"]
        pending.done.set()

    def _notification(self, method: str, params: Json) -> None:
        if method == "notifications/cancelled":
            return  # we answer the child's requests at once: nothing of ours to stop
        if method == "notifications/progress":
            self._progress(params)
            return
        if method == _LISTEN_ACK and (listen := _subscription(params)) in self._listens:
            if (acked := self._listens[listen]) is not None:
                acked.set()
            return  # our own listen stream's acknowledgement, as the SDK client consumes it
        if method == "notifications/message":
            if self._on_log is not None and params.get("level") in w.LEVELS and "data" in params:
                self._spawn(self._on_log, params)
            elif self._on_log is not None:
                log.warning("%s: skipped a log notification without a valid level and data", self.name)
            return
        if self._on_notify is not None:
            self._spawn(self._on_notify, method, params)

    def _progress(self, params: Json) -> None:
        token, progress = request_id(params.get("progressToken")), params.get("progress")
        if token is None or isinstance(progress, bool) or not isinstance(progress, int | float):
            return
        pending = self._pending.get(token)
        if pending is None or pending.progress is None:
            return
        total, text = params.get("total"), params.get("message")
        total = float(total) if isinstance(total, int | float) and not isinstance(total, bool) else None
        self._spawn(pending.progress, float(progress), total, text if isinstance(text, str) else None)

    async def _answer(self, message: Json) -> None:
        """The child asked us something: the SDK client's answers (section 2 of the plan)."""
        rid, method, params = message["id"], message["method"], message.get("params")
        try:
            result = await self.answer(method, params)
        except RpcError as exc:
            error: Json = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            await self._write_quietly({"jsonrpc": "2.0", "id": rid, "error": error})
            return
        await self._write_quietly({"jsonrpc": "2.0", "id": rid, "result": result})

    async def answer(self, method: str, params: Any) -> Json:
        """The result for one of the child's requests, or ``RpcError`` with the SDK client's words.
        A 2026 connection has no server-to-client requests: all of them are -32601 there."""
        version = self.version or w.LATEST_HANDSHAKE_VERSION
        known = version in w.HANDSHAKE_PROTOCOL_VERSIONS and method in _CHILD_REQUESTS
        if not known:
            raise RpcError(w.METHOD_NOT_FOUND, "Method not found", method)
        if method in _NOT_SUPPORTED or not (params is None or isinstance(params, dict)):
            _check_params(method, version, params)  # a malformed request: the SDK's -32602
        if method == "ping":
            return {}
        if method == "roots/list":
            if self._roots is None:
                raise RpcError(w.INVALID_REQUEST, "List roots not supported")
            return await self._roots()
        raise RpcError(w.INVALID_REQUEST, _NOT_SUPPORTED[method])

    def _spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        if self._tg is None:
            log.debug("%s: dropped a message after the end", self.name)
            return

        async def contained() -> None:
            try:
                await fn(*args)
            except Exception:
                log.exception("%s: a handler for the child's message failed", self.name)

        self._tg.start_soon(contained)


_NOT_SUPPORTED = {"sampling/createMessage": "Sampling not supported", "elicitation/create": "Elicitation not supported"}
_CHILD_REQUESTS = frozenset({"ping", "roots/list", *_NOT_SUPPORTED})


def _check_params(method: str, version: str, params: Any) -> None:
    """The SDK's own validation of a child's request, imported only for these rare requests."""
    from mcp_types import methods
    from pydantic import ValidationError

    try:
        methods.parse_server_request(method, version, params)
    except ValidationError:
        raise RpcError(w.INVALID_PARAMS, "Invalid request parameters", "") from None


def _subscription(params: Json) -> str | None:
    meta = params.get("_meta")
    value = meta.get(w.SUBSCRIPTION_ID_META_KEY) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


@asynccontextmanager
async def serving(session: ChildSession, out: Lines, pipe: ChildPipe | None = None) -> AsyncIterator[ChildSession]:
    """Read the child's lines into ``session`` while the block runs; the reader ends with it."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(session.read, out, pipe)
        try:
            yield session
        finally:
            tg.cancel_scope.cancel()

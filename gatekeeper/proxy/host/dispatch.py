"""The host side's JSON-RPC dispatcher: one task per request, cancellation by id.

The part of the host side that does not depend on MCP itself. It does what the SDK 2.3 dispatcher
does (``mcp/shared/jsonrpc_dispatcher.py``), so a host sees the answers it expects:

- each request runs in its own task, so a slow call never holds up the next line; ``initialize``
  runs *inline*: nothing after it is dispatched until it is answered (a host may pipeline);
- ``notifications/cancelled {requestId}`` cancels that request's task, and a cancelled request is
  never answered (MCP: the receiver MUST NOT answer it). Ids correlate as the SDK's do: ``"7"`` is
  ``7``. A duplicate id in flight overwrites the first in the table; both are still answered;
- at the end of input every request still in flight is cancelled and answered -32000
  ``Connection closed`` (unless its answer was already being written, or the host cancelled it);
- a handler's ``RpcError`` is answered with its code, message and data; any other exception is
  logged in full and answered -32603 with Gatekeeper's words, never its text (no internals leak);
- notifications go to ``on_notify`` in their own task; an exception there is logged, never fatal;
  responses are dropped (Gatekeeper sends the host no requests).

The session (``proxy/session.py``) runs one per connection. Messages are plain dicts
(``proxy/host/parse.py`` reads them); ``send`` writes one (the caller serialises it).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import anyio.abc

from gatekeeper.proxy.protocol import mcp as w
from gatekeeper.proxy.protocol.rpc import RequestId, RpcError, correlation_key, valid_id

log = logging.getLogger("gatekeeper.proxy.hostrpc")

Message = dict[str, Any]
Send = Callable[[Message], Awaitable[None]]
SHUTDOWN_WRITE_TIMEOUT: Final = 2.0
"""Seconds the end-of-input answers may take to write: a host that stopped reading must not hang us."""


@dataclass
class Request:
    """One request from the host, as its handler sees it."""

    id: RequestId
    method: str
    params: Message | None
    send: Send = field(repr=False)
    cancel_requested: bool = False  # set when the host cancelled it: its answer is never sent

    @property
    def progress_token(self) -> RequestId | None:
        meta = (self.params or {}).get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        return token if valid_id(token) else None

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress, if the host asked for it with a token (else nothing is sent)."""
        token = self.progress_token
        if token is None:
            return
        params: Message = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.send({"jsonrpc": w.JSONRPC_VERSION, "method": "notifications/progress", "params": params})


OnRequest = Callable[[Request], Awaitable[Message]]
OnNotify = Callable[[str, Message | None], Awaitable[None]]


@dataclass
class _InFlight:
    request: Request
    scope: anyio.CancelScope


class HostRpc:
    """Dispatches one host connection's messages to ``on_request`` and ``on_notify``; answers via ``send``."""

    def __init__(
        self,
        send: Send,
        on_request: OnRequest,
        on_notify: OnNotify,
        *,
        inline: frozenset[str] = frozenset({"initialize"}),
    ) -> None:
        self._send, self._on_request, self._on_notify, self._inline = send, on_request, on_notify, inline
        self.in_flight: dict[RequestId, _InFlight] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    async def serve(self, messages: AsyncIterable[Message]) -> None:
        """Dispatch ``messages`` until they end; then what is still in flight is answered -32000."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                async for message in messages:
                    await self._dispatch(message)
            finally:
                tg.cancel_scope.cancel()  # end of input: cancel the handlers; each answers -32000
        self._tg = None

    async def _dispatch(self, message: Message) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            log.debug("dropped a response from the host (id %r): Gatekeeper sends it no requests", message.get("id"))
            return
        if "id" not in message:
            self._notified(method, message.get("params"))
            return
        request = Request(message["id"], method, message.get("params"), self._send)
        flight = _InFlight(request, anyio.CancelScope())
        self.in_flight[correlation_key(request.id)] = flight  # a duplicate id overwrites, as the SDK does
        assert self._tg is not None
        if method in self._inline:
            await self._handle(flight)  # parks the read loop: nothing after it runs before its answer
        else:
            self._tg.start_soon(self._handle, flight)

    def _notified(self, method: str, params: Message | None) -> None:
        if method == "notifications/cancelled":
            self.cancel((params or {}).get("requestId"))
        assert self._tg is not None
        self._tg.start_soon(self._notify, method, params)  # teed on, as the SDK does

    def cancel(self, request_id: Any) -> None:
        """The host cancelled a request: stop its handler; it gets no answer. Unknown ids are ignored."""
        if not valid_id(request_id):
            return
        flight = self.in_flight.get(correlation_key(request_id))
        if flight is not None:
            flight.request.cancel_requested = True
            flight.scope.cancel()

    async def _notify(self, method: str, params: Message | None) -> None:
        try:
            await self._on_notify(method, params)
        except Exception:
            log.exception("the handler of a %s notification failed", method)

    async def _handle(self, flight: _InFlight) -> None:
        """Run one request's handler and answer it (or not, when cancelled)."""
        request = flight.request
        answering = False
        try:
            with flight.scope:
                try:
                    outcome = await self._outcome(request)
                finally:
                    self._settled(flight)
                if not request.cancel_requested:
                    answering = True
                    await self._send({"jsonrpc": w.JSONRPC_VERSION, "id": request.id, **outcome})
        except anyio.get_cancelled_exc_class():
            if not answering and not request.cancel_requested:
                await self._closed(request)
            raise

    async def _outcome(self, request: Request) -> Message:
        """``{"result": ...}`` or ``{"error": ...}``; cancellation passes through."""
        try:
            return {"result": await self._on_request(request)}
        except RpcError as exc:
            return {"error": exc.error()}
        except Exception:
            log.exception("%s failed", request.method)
            message = f"Gatekeeper internal error in {request.method}; details are in its log"
            return {"error": {"code": w.INTERNAL_ERROR, "message": message}}

    def _settled(self, flight: _InFlight) -> None:
        key = correlation_key(flight.request.id)
        if self.in_flight.get(key) is flight:  # not a newer request with the same id
            del self.in_flight[key]

    async def _closed(self, request: Request) -> None:
        """Answer a request cut off by the end of input, shielded and bounded."""
        error = {"code": w.CONNECTION_CLOSED, "message": "Connection closed"}
        with anyio.move_on_after(SHUTDOWN_WRITE_TIMEOUT, shield=True):
            try:
                await self._send({"jsonrpc": w.JSONRPC_VERSION, "id": request.id, "error": error})
            except Exception:
                log.debug("could not answer %r at the end of input", request.id, exc_info=True)

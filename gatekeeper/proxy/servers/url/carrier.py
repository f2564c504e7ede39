"""The fast path's carrier to a ``url`` server: each raw request is one POST, on a connection of its own.

``ChildPipe`` (proxy/servers/stdio/process.py) carries raw JSON-RPC lines to a stdio child; this carries them to a
Streamable HTTP server as the SDK's transport would: the policy's headers, the session id and
protocol version that transport sends and the per-request headers of the SDK client's stamp, to the
address checked at start, with ``GuardedTransport``'s limits, errors and words. A request goes on an
idle kept-alive connection of our own (proxy/servers/url/http.py, ``RawCall`` below: ~0.3 ms of the proxy's
CPU a call, where httpx2's client cost ~1.5 ms); with none idle, on the httpx2 client the SDK
transport uses. Each message of the answer (a JSON body, or the events of an SSE stream: progress,
logs, then the response) goes to ``tap`` as bytes; what the tap does not take goes to the SDK
client's read stream, as a child's stdout line does. Whatever the SDK transport would have turned
into an error for the request goes to ``on_trouble`` as that same error; ``RESEND`` when the
request must go the SDK way instead (a redirect, which the server did not run); ``TIMEOUT`` when
it outlived the policy's timeout (the names are proxy/servers/carrier.py's: the fast path knows them
without importing this module).
Cancellation follows the transport: a 2026 POST is aborted, a 2025 one gets ``notifications/cancelled``.

``RawCall``: one fast-path request on a kept-alive connection of our own (proxy/servers/url/http.py),
as ``HttpCarrier`` sees it.

It turns what the connection reads into what the httpx2 path (``HttpCarrier._answered``) makes of
the same answer: each message to the tap or the SDK client, the same errors in the same words, the
policy's timeout as one timer instead of a task and a cancel scope. An answer that is neither 200
JSON nor 200 events is judged by the httpx2 path's own code (``HttpCarrier.judge``). A connection
that closes before any byte of the answer (the server dropped it while it was idle, or the server is
gone) sends the request over httpx2 instead, as a browser retries on a fresh connection; that one
then gives the httpx2 path's answer, a connection error included.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import anyio
import httpx2
import orjson
from mcp import MCPError
from mcp.shared._httpx_utils import redirect_location
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    JSONRPCError,
    jsonrpc_message_adapter,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from gatekeeper.proxy.servers.carrier import RESEND, TIMEOUT, Trouble
from gatekeeper.proxy.servers.url.http import Pool, request_head

if TYPE_CHECKING:
    import ssl

    from gatekeeper.proxy.servers.url.addresses import Target
    from gatekeeper.proxy.servers.url.http import Connection

log = logging.getLogger("gatekeeper.proxy.fast")

ANSWERED, UNANSWERED = object(), object()  # a message's outcome: the call's answer, or one before it
DRAIN = 0.5  # seconds an event stream may go on after the response before the connection is dropped


_BASE = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
Deliver = Callable[[SessionMessage | Exception], Awaitable[None]]


class Guard(Protocol):
    """What the carrier reads of the connection's ``GuardedTransport`` (proxy/servers/url/connection.py):
    the address checked at start, its TLS context, the session the SDK transport holds, and its
    judgement of an answer our own connections read."""

    @property
    def target(self) -> Target: ...

    @property
    def ssl_context(self) -> ssl.SSLContext: ...

    @property
    def session_id(self) -> str | None: ...

    @property
    def protocol_version(self) -> str | None: ...

    async def judge(self, request: httpx2.Request, response: httpx2.Response) -> httpx2.Response: ...

    def unreachable(self, rid: Any, what: str) -> httpx2.Response: ...


class HttpCarrier:
    """Raw requests to one connection (one life) of a url server, beside the SDK client's transport."""

    wants_headers = True  # the protocol-version header and the session's, from the SDK stamp

    def __init__(self, timeout: float, body_limit: int) -> None:
        self.alive = False
        self.tap: Callable[[bytes], bool] | None = None
        self.on_end: Callable[[Any], None] | None = None
        self.on_trouble: Callable[[Any, str, Trouble], None] | None = None
        self.timeout, self._limit = timeout, body_limit
        self._client: httpx2.AsyncClient | None = None
        self._guard: Guard | None = None
        self._url = ""
        self._tasks: set[asyncio.Task[None]] = set()
        self._deliver: Deliver | None = None
        self._posts: dict[str, anyio.CancelScope] = {}
        self._raw: dict[str, RawCall] = {}  # requests on our own kept-alive connections
        self._pool: Pool | None = None
        self._fixed: dict[str, str] = {}
        self._target_path = "/"
        self._inbox: deque[SessionMessage] = deque()

    def attach(self, client: httpx2.AsyncClient, url: str, guard: Guard, deliver: Deliver) -> None:
        self._client, self._url, self._guard, self._deliver = client, url, guard, deliver
        parts = urlsplit(url)
        secure = parts.scheme == "https"
        self._target_path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        fixed = {k.lower(): v for k, v in client.headers.items() if k.lower() != "accept-encoding"}  # no gzip
        self._fixed = {"host": parts.netloc.rpartition("@")[2], **fixed}
        target = guard.target
        port = target.port or (443 if secure else 80)
        self._pool = Pool(target.addresses, port, guard.ssl_context if secure else None, target.host, self._limit)
        self._pool.warm()  # while the SDK client shakes hands: the first allowed call finds it open
        self.alive = True

    def ended(self) -> None:
        """The connection is closing: its POSTs end now, and the calls still waiting hear it (on_end)."""
        self.alive = False
        for task in list(self._tasks):
            task.cancel()
        for call in list(self._raw.values()):
            call.drop()
        if self._pool is not None:
            self._pool.close()
        if self.on_end is not None:
            self.on_end(self)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """A plain asyncio task, not an anyio task group's: ~0.05 ms sooner on the wire per call."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def limit(self) -> int:
        return self._limit

    def forget(self, ours: str) -> None:
        self._raw.pop(ours, None)

    @property
    def modern(self) -> bool:
        return self._guard is not None and self._guard.protocol_version in MODERN_PROTOCOL_VERSIONS

    def send(self, ours: str, data: bytes, headers: dict[str, str]) -> bool:
        """Start the POST of one request (``ours`` its id); False if this connection is not usable.

        On an idle kept-alive connection of our own it is written at once (proxy/servers/url/http.py); with
        none idle it goes over httpx2 and another connection is opened for the calls to come."""
        if not self.alive or self._client is None:
            return False
        conn = self._pool.idle() if self._pool is not None else None
        head = None
        if conn is not None:
            head = request_head(self._target_path, {**self._fixed, **self._headers(headers)}, len(data))
        if conn is None or head is None:
            self.resend(ours, data, headers)
            if self._pool is not None and conn is None:
                self._pool.warm()
            return True
        call = RawCall(self, conn, ours, data, headers)
        self._raw[ours] = call
        conn.start(call, head + data)
        return True

    def resend(self, ours: str, data: bytes, headers: dict[str, str]) -> None:
        """The request over httpx2: when no connection of our own is idle, or ours closed unanswered."""
        self._posts[ours] = scope = anyio.CancelScope()
        self.spawn(self._exchange(ours, data, headers, scope))

    def cancel(self, ours: str, data: bytes, headers: dict[str, str]) -> None:
        """The host gave up on ``ours``: abort its POST (2026), or send the notice (2025), as the SDK does."""
        scope = self._posts.get(ours)
        if self.modern:
            if scope is not None:
                scope.cancel()
            if (call := self._raw.get(ours)) is not None:
                call.drop()
            return
        if self.alive and self._client is not None:
            self.spawn(self._notify(data, headers))

    def _headers(self, extra: dict[str, str]) -> dict[str, str]:
        """What the SDK transport's ``_prepare_headers`` sends, then the request's own (its stamp's)."""
        headers = dict(_BASE)
        guard = self._guard
        if guard is not None and guard.session_id:
            headers["mcp-session-id"] = guard.session_id
        if guard is not None and guard.protocol_version:
            headers["mcp-protocol-version"] = guard.protocol_version
        headers.update(extra)
        return headers

    async def _notify(self, data: bytes, headers: dict[str, str]) -> None:
        assert self._client is not None
        try:
            response = await self._client.post(self._url, content=data, headers=self._headers(headers))
            await response.aclose()
        except Exception as exc:  # a courtesy, as on the SDK's transport: nobody waits for its answer
            log.info("could not send a cancellation: %s", exc)

    async def _exchange(self, ours: str, data: bytes, headers: dict[str, str], scope: anyio.CancelScope) -> None:
        """One request's POST and answer, bounded by the policy's timeout (as ``Downstream.call`` is)."""
        try:
            with scope, anyio.move_on_after(self.timeout) as timer:
                outcome = await self._post(ours, data, headers)
                if outcome is UNANSWERED:
                    await anyio.sleep_forever()  # the SDK client would wait for it until the timeout too
                if isinstance(outcome, MCPError | str):
                    self.report(ours, outcome)
            if timer.cancelled_caught:
                self.report(ours, TIMEOUT)
        except Exception:  # on the SDK's transport this would end the connection
            log.exception("a raw POST to %s failed", self._url)
            self.report(ours, MCPError(CONNECTION_CLOSED, "Connection closed"))
        finally:
            self._posts.pop(ours, None)

    def report(self, ours: str, trouble: Trouble) -> None:
        if self.on_trouble is not None:
            self.on_trouble(self, ours, trouble)

    async def _post(self, ours: str, data: bytes, headers: dict[str, str]) -> object:
        """What ``StreamableHTTPTransport._handle_post_request`` does with the answer, raw."""
        assert self._client is not None
        async with self._client.stream("POST", self._url, content=data, headers=self._headers(headers)) as response:
            return await self._answered(ours, response)

    async def _answered(self, ours: str, response: httpx2.Response) -> object:
        status = response.status_code
        if status == 202:
            return MCPError(INVALID_REQUEST, "server answered a request with 202 Accepted")
        if redirect_location(response) is not None:
            return RESEND  # the SDK path follows it (same origin) or names it
        if status >= 400:
            return await self._refused(response)
        kind = response.headers.get("content-type", "").lower()
        if kind.startswith("application/json"):
            try:
                body = await response.aread()
            except httpx2.StreamError as exc:
                return MCPError(PARSE_ERROR, f"Failed to parse JSON response: {exc}")
            return await self._message(ours, body, "Failed to parse JSON response")
        if kind.startswith("text/event-stream"):
            return await self._events(ours, response)
        return MCPError(INVALID_REQUEST, f"Unexpected content type: {kind}")

    async def judge(self, call: RawCall, status: int, headers: list[tuple[str, str]], body: bytes | None) -> None:
        """An answer our own connection read whole (not 200 JSON or events): as the httpx2 path takes it."""
        assert self._guard is not None
        sent = {**self._fixed, **self._headers(call.headers)}
        request = httpx2.Request("POST", self._url, headers=sent, content=call.data)
        response = httpx2.Response(status, headers=headers, content=body or b"", request=request)
        judged = await self._guard.judge(request, response)
        # httpx2's client marks a redirect (its ``next_request``) after the transport: the same test here
        outcome = RESEND if judged.has_redirect_location else await self._answered(call.ours, judged)
        call.settled(outcome)

    def broken(self, call: RawCall, what: str) -> None:
        """Our connection broke before the answer began: the error the httpx2 path gives for that."""
        assert self._guard is not None
        rid = call.ours
        self.spawn(self._broken(call, self._guard.unreachable(rid, what)))

    async def _broken(self, call: RawCall, response: httpx2.Response) -> None:
        call.settled(await self._refused(response))

    @staticmethod
    async def _drain(events: Any) -> None:
        """Read the stream to its end (the server ends it after the response), briefly: an unread
        body costs the connection, and a new one per call costs more than the call (the host has
        its answer already; what comes after it is dropped, as the SDK transport drops it)."""
        with anyio.move_on_after(DRAIN), suppress(httpx2.HTTPError):
            async for _ in events:
                pass

    async def _refused(self, response: httpx2.Response) -> MCPError:
        """A non-2xx answer: the JSON-RPC error in its body, else the SDK transport's stand-in."""
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            try:
                parsed = jsonrpc_message_adapter.validate_json(await response.aread(), by_name=False)
                if isinstance(parsed, JSONRPCError):
                    return MCPError.from_error_data(parsed.error)
            except (httpx2.StreamError, ValidationError):
                pass
        if response.status_code == 404:
            if self._guard is None or not self._guard.session_id:
                return MCPError(METHOD_NOT_FOUND, "Not Found")
            return MCPError(INVALID_REQUEST, "Session terminated")
        return MCPError(INTERNAL_ERROR, "Server returned an error response")

    async def _events(self, ours: str, response: httpx2.Response) -> object:
        """An SSE answer: each message event in turn, until the response (the SDK stops there too)."""
        try:
            events = httpx2.EventSource(response, max_event_size=self._limit).__aiter__()
            async for sse in events:
                if sse.event != "message" or not sse.data:
                    continue  # a priming event, or one the SDK only logs
                outcome = await self._message(ours, sse.data.encode("utf-8"), "Failed to parse SSE message")
                if outcome is ANSWERED:
                    await self._drain(events)
                if outcome is not UNANSWERED:
                    return outcome
        except httpx2.SSEError as exc:
            return MCPError(CONNECTION_CLOSED, f"SSE stream failed: {exc}")
        return MCPError(CONNECTION_CLOSED, "SSE stream ended without a response")

    def _offer(self, data: bytes) -> bool:
        """True if the tap took the message; a failing tap leaves it to the SDK client (as ChildPipe)."""
        tap = self.tap
        if tap is None:
            return False
        try:
            return tap(data)
        except Exception:
            log.exception("fast path failed on a server's message; leaving it to the SDK client")
            return False

    async def _message(self, ours: str, data: bytes, failed: str) -> object:
        """One message of the answer: to the tap (the fast path), else to the SDK client."""
        outcome = self.take(ours, data, failed)
        if isinstance(outcome, SessionMessage):
            if self._deliver is not None:
                await self._deliver(outcome)
            return UNANSWERED
        return outcome

    def take(self, ours: str, data: bytes, failed: str) -> object:
        """The tap's outcome for one message of the answer, or the message parsed for the SDK client."""
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            message = None
        if isinstance(message, dict):
            final = "method" not in message and message.get("id") == ours
            if self._offer(data):
                return ANSWERED if final else UNANSWERED
        try:
            return SessionMessage(jsonrpc_message_adapter.validate_json(data, by_name=False))
        except ValidationError as exc:
            return MCPError(PARSE_ERROR, f"{failed}: {exc}")

    def to_client(self, message: SessionMessage) -> None:
        """A message of a raw answer that the tap did not take: to the SDK client, in order."""
        self._inbox.append(message)
        if len(self._inbox) == 1:
            self.spawn(self._hand_over())

    async def _hand_over(self) -> None:
        while self._inbox:
            if self._deliver is not None:
                await self._deliver(self._inbox[0])
            self._inbox.popleft()


class RawCall:
    """The request ``ours`` on ``conn``: ``http.Exchange`` for the connection, outcomes for the carrier."""

    def __init__(self, carrier: HttpCarrier, conn: Connection, ours: str, data: bytes, headers: dict[str, str]):
        self.carrier, self.link, self.ours, self.data, self.headers = carrier, conn, ours, data, headers
        self.kind = ""
        self.answered = self.done = self.body_done = False
        self._loop = asyncio.get_running_loop()
        self._timer = self._loop.call_later(carrier.timeout, self._timed_out)

    # -- http.Exchange ----------------------------------------------------------------------------

    def head(self, status: int, headers: dict[str, str]) -> str:
        kind = headers.get("content-type", "").lower()
        if status == 200 and kind.startswith("application/json"):
            self.kind = "json"
        elif status == 200 and kind.startswith("text/event-stream"):
            self.kind = "sse"
        else:
            self.kind = "whole"
        return self.kind

    def message(self, data: bytes) -> None:
        if self.done or self.answered:
            return  # after the response, an event stream's messages are dropped (as the SDK transport drops them)
        failed = "Failed to parse JSON response" if self.kind == "json" else "Failed to parse SSE message"
        outcome = self.carrier.take(self.ours, data, failed)
        if isinstance(outcome, SessionMessage):
            self.carrier.to_client(outcome)
        elif outcome is ANSWERED:
            self.answered = True
            self._timer.cancel()
            self.carrier.forget(self.ours)
            if self.kind == "sse" and not self.body_done:
                self._timer = self._loop.call_later(DRAIN, self._drop_connection)
        elif outcome is not UNANSWERED:
            if self.kind == "sse":
                self._drop_connection()  # the rest of the stream is not read: the connection cannot be reused
            self.settled(outcome)

    def whole(self, status: int, headers: list[tuple[str, str]], body: bytes | None) -> None:
        if not self.done:
            self.carrier.spawn(self.carrier.judge(self, status, headers, body))

    def failed(self, what: str, fresh: bool) -> None:
        self.body_done = True  # the connection is gone: nothing of it to drop any more
        if self.done or self.answered:
            self._timer.cancel()
            return
        if fresh:  # nothing came back: the httpx2 path sends it, on a connection of its own
            self._finish()
            self.carrier.resend(self.ours, self.data, self.headers)
        elif self.kind == "json":
            self.settled(MCPError(PARSE_ERROR, f"Failed to parse JSON response: reading the answer failed ({what})"))
        elif self.kind == "sse":
            self.settled(MCPError(CONNECTION_CLOSED, f"SSE stream failed: reading the answer failed ({what})"))
        else:
            self.carrier.broken(self, what)

    def ended(self, over_limit: bool) -> None:
        self.body_done = True
        if over_limit and not self.answered and self.kind in ("json", "sse"):
            what = f"the answer is over {self.carrier.limit // (1024 * 1024)} MB; refused"
            if self.kind == "json":
                self.settled(MCPError(PARSE_ERROR, f"Failed to parse JSON response: {what}"))
            else:
                self.settled(MCPError(CONNECTION_CLOSED, f"SSE stream failed: {what}"))
        elif self.answered:
            self._timer.cancel()
            self.done = True
        elif self.kind == "sse":
            self.settled(MCPError(CONNECTION_CLOSED, "SSE stream ended without a response"))
        # json that was not the answer: it waits for the timeout, as on the httpx2 path; whole: being judged

    # -- outcomes ----------------------------------------------------------------------------------

    def settled(self, outcome: object) -> None:
        """What the answer came to: an error or ``RESEND``/``TIMEOUT`` is reported; ``UNANSWERED`` waits on."""
        if self.done or outcome is UNANSWERED:  # UNANSWERED: a judged answer that was not the response
            return
        self._finish()
        if isinstance(outcome, MCPError | str):
            self.carrier.report(self.ours, outcome)

    def drop(self) -> None:
        """Cancelled by the host (2026: the POST is aborted), or the connection to the server ends."""
        self._finish()
        self._drop_connection()

    def _finish(self) -> None:
        self.done = True
        self._timer.cancel()
        self.carrier.forget(self.ours)

    def _timed_out(self) -> None:
        if self.done:
            return
        self._finish()
        self._drop_connection()
        trouble: Trouble = TIMEOUT
        self.carrier.report(self.ours, trouble)

    def _drop_connection(self) -> None:
        """Abort the connection while it still carries this request's answer (never once it serves another)."""
        if not self.body_done:
            self.body_done = True
            self.link.abort()

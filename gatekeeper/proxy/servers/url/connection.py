"""The HTTP connection to a ``url`` server: one httpx2 client per connection, pinned and bounded.

``connect`` gives the SDK's ``Client`` (behind proxy/servers/url/sdkclient.py's adaptor) its transport
streams. On the way it reads the headers' secrets from the environment (never logged), resolves the
host once and checks the addresses (``proxy/servers/url/addresses.py``), and connects only to the address it
checked, TLS still verifying the URL's host name. ``GuardedTransport`` turns what the SDK would
either crash on or report vaguely (a refused connection, a timeout, an HTML page, a ``5xx``, a
body over ``BODY_LIMIT``) into a JSON-RPC error for that one request that names the server and
what happened; ``failure`` tells ``Downstream`` which errors came from the connection, not the
server's tools, and ``call`` bounds each of its calls.

Only a policy with a url server loads this module (and with it httpx2 and the SDK's HTTP client):
``Downstream`` and the fast path import it where a url server needs it, never at start-up.
"""

from __future__ import annotations

import logging
import os
import secrets
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TextIO, TypeVar

import anyio
import httpx2
import orjson
from mcp import MCPError, types
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from gatekeeper.policy import Server
from gatekeeper.proxy.protocol.rpc import RpcError
from gatekeeper.proxy.servers import early
from gatekeeper.proxy.servers.face import ChildClient, DownstreamUnavailable
from gatekeeper.proxy.servers.url.addresses import Resolver, Target, resolve, system_resolver
from gatekeeper.proxy.servers.url.carrier import HttpCarrier

if TYPE_CHECKING:
    from gatekeeper.proxy.servers.carrier import Carrier

T = TypeVar("T")

BODY_LIMIT = 10 * 1024 * 1024  # one answer (JSON body, or one SSE response to a POST) at most
# In error.data: this error is about the connection, not the tool. Random per process, so a server
# cannot forge one (and have a call sent twice as if its session had expired).
_MARKER = f"gatekeeper_http_{secrets.token_hex(8)}"
# What the SDK's transport says when the HTTP exchange, not the server's tool, failed.
_SDK_FAILURES = (
    "Redirect to",
    "Unexpected content type",
    "SSE stream",
    "Failed to parse JSON response",
    "Server returned an error response",
    "server answered a request with 202",
)

# The SDK logs transport trouble with tracebacks; without a handler Python would print them to
# our stderr. What matters reaches the host as an error and the server's log through this module.
logging.getLogger("mcp.client.streamable_http").addHandler(logging.NullHandler())
logging.getLogger("mcp.client.streamable_http").propagate = False


class MissingSecret(Exception):
    """A header's environment variable is not set (the message names it, never a value)."""


@dataclass(frozen=True)
class Failure:
    """An HTTP-level failure of one call: ``reset`` drops the connection (a new one next call)."""

    message: str
    reset: bool
    session_expired: bool = False


def headers_for(name: str, server: Server, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The policy's headers with their values from the environment, or ``MissingSecret``."""
    values: dict[str, str] = {}
    for header, source in server.headers.items():
        value = source.value(dict(os.environ) if environ is None else environ)
        if value is None:
            raise MissingSecret(
                f"header {header!r} takes its value from the environment variable "
                f"{source.env}, which is not set; set it where the host starts the proxy (its MCP 'env')"
            )
        values[header] = value
    return values


def _error(exc: MCPError | RpcError) -> tuple[int, str, Any]:
    """Code, message and data of the SDK's error (the raw carrier's) or ours (proxy/servers/url/sdkclient.py's)."""
    if isinstance(exc, MCPError):
        return exc.error.code, exc.error.message, exc.error.data
    return exc.code, exc.message, exc.data


def failure(name: str, exc: MCPError | RpcError) -> Failure | None:
    """The connection failure behind ``exc``, or None when the server itself answered with an error."""
    _, message, data = _error(exc)
    if isinstance(data, dict) and data.get(_MARKER):
        kind = data[_MARKER]
        return Failure(
            f"downstream server '{name}' {message}",
            reset=kind in ("unreachable", "timeout", "session"),
            session_expired=kind == "session",
        )
    if message.startswith(_SDK_FAILURES):
        return Failure(f"downstream server '{name}': {message}", reset=False)
    return None


def verdict(name: str, exc: MCPError | RpcError) -> tuple[str, str, bool]:
    """What a call makes of ``exc`` from a url server (``Downstream.call`` on the SDK path; the raw
    fast path copies it): kind, message, and whether the connection is dropped. Kinds: ``server``
    (the server's own error, passed on), ``gone`` (the connection closed), ``retry`` (a session the
    server forgot: the call never ran there), ``unavailable`` (an HTTP-level failure, named)."""
    problem = failure(name, exc)
    if problem is not None:
        return ("retry" if problem.session_expired else "unavailable"), problem.message, problem.reset
    code, message, _ = _error(exc)
    if code == -32000 and "closed" in message.lower():
        return "gone", f"downstream server '{name}' stopped during the call: {message}", True
    return "server", message, False


def renewing(name: str) -> str:
    """The log line for a session the server forgot (the call goes again on a new one)."""
    return f"{name} ended our session (restarted?); starting a new one and sending the call again"


def timed_out(name: str, timeout: float) -> str:
    """The words for a call that outlived the policy's timeout (the connection is dropped)."""
    return (
        f"downstream server '{name}' did not answer within {timeout:g} s (the policy's 'timeout' for it); "
        "the connection is dropped and opened again on the next call"
    )


def _kind(exc: BaseException) -> str | None:
    data = _error(exc)[2] if isinstance(exc, MCPError | RpcError) else None
    return data.get(_MARKER) if isinstance(data, dict) else None


def unreachable(exc: BaseException) -> bool:
    """The connect attempt itself failed, or could not be made (a header's secret is missing): no
    second try on the legacy handshake would help."""
    return isinstance(exc, MissingSecret) or _kind(exc) == "unreachable"


def described(exc: BaseException) -> str | None:
    """What went wrong, when ``exc`` is one of this module's errors (a missing secret, the HTTP exchange)."""
    if isinstance(exc, MissingSecret):
        return str(exc)
    return _error(exc)[1] if isinstance(exc, MCPError | RpcError) and _kind(exc) else None


def carrier(server: Server) -> HttpCarrier:
    """The fast path's carrier for one connection to ``server`` (proxy/servers/url/carrier.py)."""
    return HttpCarrier(server.timeout, BODY_LIMIT)


class Supervised(Protocol):
    """What ``call`` needs of the ``Downstream`` it calls for: its name and timeout, to renew its session."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> Server: ...

    def mark_gone(self) -> None: ...

    def note(self, text: str) -> None: ...

    async def ready(self) -> ChildClient: ...


async def call(downstream: Supervised, client: ChildClient, method: Callable[[ChildClient], Awaitable[T]]) -> T:
    """One request to a url server (``Downstream.call``), bounded by the policy's timeout. A session the
    server forgot (it restarted) is replaced once and the request sent again: it never ran there, and
    only reads and allowed calls come here (a proposal's effect never reaches a server)."""
    name, timeout = downstream.name, downstream.config.timeout
    with anyio.move_on_after(timeout):
        for attempt in (1, 2):
            try:
                return await method(client)
            except RpcError as exc:  # the SDK client's MCPError, as proxy/servers/url/sdkclient.py gives it
                kind, message, reset = verdict(name, exc)
                if kind in ("server", "gone"):
                    raise
                if reset:
                    downstream.mark_gone()
                if not (kind == "retry" and attempt == 1):
                    raise DownstreamUnavailable(message) from None
            downstream.note(renewing(name))
            client = await downstream.ready()
    downstream.mark_gone()
    raise DownstreamUnavailable(timed_out(name, timeout))


class BodyError(httpx2.SSEError, httpx2.StreamError):
    """Reading an answer failed (over the limit, timed out): the SDK reports it for that request."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)


class _Capped(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int | None) -> None:
        self._inner, self._limit = inner, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        try:
            async for chunk in self._inner:
                total += len(chunk)
                if self._limit is not None and total > self._limit:
                    raise BodyError(f"the answer is over {self._limit // (1024 * 1024)} MB; refused")
                yield chunk
        except httpx2.TransportError as exc:
            if isinstance(exc, BodyError):
                raise
            raise BodyError(f"reading the answer failed ({_what(exc)})") from None

    async def aclose(self) -> None:
        await self._inner.aclose()


def _what(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _request_id(request: httpx2.Request) -> Any:
    try:
        body = orjson.loads(request.content)
    except (orjson.JSONDecodeError, httpx2.RequestNotRead):
        return None
    return body.get("id") if isinstance(body, dict) and "method" in body else None


def _problem(response: httpx2.Response) -> str | None:
    """What is wrong with an answer the SDK would only call vague names, if anything."""
    status, kind = response.status_code, response.headers.get("content-type", "").split(";")[0].strip().lower()
    if status in (202, 404) or 300 <= status < 400:  # the SDK's own cases (notification, session, redirect)
        return None
    if status >= 400 and kind != "application/json":
        hint = "; check the headers the policy sends it (headers: {env: ...})" if status in (401, 403) else ""
        return f"answered HTTP {status} {response.reason_phrase} ({kind or 'no content type'}){hint}"
    if status < 300 and kind not in ("application/json", "text/event-stream"):
        return f"answered HTTP {status} with {kind or 'no content type'}, not MCP (JSON or an event stream)"
    return None


class GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over a pinned connection pool, answering for the server when it cannot."""

    def __init__(
        self, name: str, target: Target, errlog: TextIO, limit: int = BODY_LIMIT, verify: ssl.SSLContext | None = None
    ) -> None:
        super().__init__(trust_env=False)
        context = verify or httpx2.create_ssl_context(trust_env=False)  # the system's CAs; tests bring their own
        import httpcore2  # here, not at import: only a url server needs it (~30 ms of the proxy's start)

        from gatekeeper.proxy.servers.url.pinned import Pinned

        self._pool = httpcore2.AsyncConnectionPool(ssl_context=context, network_backend=Pinned(target))
        self._name, self._target, self._errlog, self._limit = name, target, errlog, limit
        self.target, self.ssl_context = target, context  # the fast path's own connections use the same
        self.session_id: str | None = None  # what the SDK transport sends (the fast path sends the same)
        self.protocol_version: str | None = None

    def log(self, text: str) -> None:
        self._errlog.write(f"{early.MARK} {time.strftime('%Y-%m-%dT%H:%M:%S')} {text}\n")
        self._errlog.flush()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        listen = request.method == "GET"
        if request.method == "POST":
            self.session_id = request.headers.get("mcp-session-id")
            self.protocol_version = request.headers.get("mcp-protocol-version", self.protocol_version)
        if listen:  # the server's own stream may stay quiet for hours; only requests are timed
            request.extensions["timeout"] = {**request.extensions.get("timeout", {}), "read": None}
        try:
            response = await super().handle_async_request(request)
        except httpx2.TransportError as exc:
            self.log(f"{request.method} {self._target.host} failed: {_what(exc)}")
            rid = None if listen else _request_id(request)
            if rid is None:
                raise
            where = f"{self._target.host} ({', '.join(self._target.addresses)}) port {self._target.port}"
            if isinstance(exc, httpx2.ReadTimeout | httpx2.WriteTimeout):
                return self._error(rid, f"at {where} did not answer in time ({_what(exc)})", "timeout")
            return self._error(rid, f"could not be reached at {where}: {_what(exc)}", "unreachable")
        return await self.judge(request, response)

    async def judge(self, request: httpx2.Request, response: httpx2.Response) -> httpx2.Response:
        """What the server's answer means for the request: itself, capped, or our error in its place
        (also for the answers the fast path's kept-alive connections read, proxy/servers/url/http.py)."""
        listen = request.method == "GET"
        problem = None if listen else _problem(response)
        kind = "answer"
        if response.status_code == 404 and request.headers.get("mcp-session-id") and not listen:
            problem, kind = "does not know our session any more (HTTP 404; restarted?)", "session"
        rid = None if problem is None else _request_id(request)
        if problem is not None and rid is not None:
            await response.aclose()
            self.log(f"{request.method} {self._target.host}: {problem}")
            return self._error(rid, problem, kind)
        if response.status_code >= 400:
            self.log(f"{request.method} {self._target.host}: HTTP {response.status_code}")
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _Capped(response.stream, None if listen else self._limit)
        return response

    def unreachable(self, rid: Any, what: str) -> httpx2.Response:
        """Our error for a request whose connection broke before any answer (the fast path's own connections)."""
        self.log(f"POST {self._target.host} failed: {what}")
        where = f"{self._target.host} ({', '.join(self._target.addresses)}) port {self._target.port}"
        return self._error(rid, f"could not be reached at {where}: {what}", "unreachable")

    @staticmethod
    def _error(rid: Any, message: str, kind: str) -> httpx2.Response:
        """A JSON-RPC error the SDK hands to the waiting request (status 502: it is ours, not the server's)."""
        error = {"code": types.INTERNAL_ERROR, "message": message, "data": {_MARKER: kind}}
        return httpx2.Response(502, json={"jsonrpc": "2.0", "id": rid, "error": error})


@asynccontextmanager
async def connect(
    name: str,
    server: Server,
    errlog: TextIO,
    resolver: Resolver = system_resolver,
    carrier: Carrier | None = None,
) -> AsyncIterator[TransportStreams]:
    """Transport streams to the server at ``server.url``, over the one address checked now; ``carrier``
    (the fast path's, if an ``HttpCarrier``) gets the same client, and a way into the SDK client's read stream."""
    assert server.url is not None
    http = carrier if isinstance(carrier, HttpCarrier) else None
    headers = headers_for(name, server)
    target = await anyio.to_thread.run_sync(resolve, name, server, resolver)
    transport = GuardedTransport(name, target, errlog)
    transport.log(f"connecting to {server.url} at {', '.join(target.addresses)} port {target.port}")
    timeout = httpx2.Timeout(server.timeout, read=server.timeout + 1)  # the call's own bound (Downstream) comes first
    async with (
        httpx2.AsyncClient(transport=transport, headers=headers, timeout=timeout, trust_env=False) as client,
        streamable_http_client(server.url, http_client=client, max_sse_event_size=BODY_LIMIT) as (read, write),
    ):
        if http is None:
            yield read, write
            return
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def forward() -> None:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async with send:
                    async for item in read:
                        await send.send(item)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(forward)
                http.attach(client, server.url, transport, send.send)
                try:
                    yield receive, write
                finally:
                    tg.cancel_scope.cancel()
        finally:
            http.ended()

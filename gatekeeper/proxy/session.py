"""One host connection: our JSON-RPC server toward the host, in front of the routing's handlers.

A host line goes: ``host/stdio`` (queued lines) -> ``host/parse`` (orjson; the oracle,
``host/oracle``, only for a line it is unsure of) -> ``host/era.Connection`` (era lock, envelope
rungs, handshake gate) -> ``host/dispatch.HostRpc`` (a task per request, cancellation) -> the
``Proxy``'s own handlers (proxy/routing.py) -> a result shaped per era (``host/era.shape_result``)
-> ``HostOut``, the one writer of stdout. The fast path (``proxy/fast/path.py``) takes its lines
first; a ``HostState`` is what ``Proxy`` and the fast path read of the host. Params are checked by
our own rules (``host/params``; the SDK's models only for what they cannot vouch for), so a
url-free policy never imports the SDK (tests/test_startup_imports.py). tests/test_hostera*.py hold
these answers to an SDK ``Server`` configured as Gatekeeper's used to be (tests/sdk_oracle_host.py).

It lives above the host side because it joins the host's requests to the routing.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Final, cast

import anyio
import orjson

from gatekeeper.proxy.host import parse
from gatekeeper.proxy.host.call import HostCall
from gatekeeper.proxy.host.dispatch import HostRpc, Message, Request
from gatekeeper.proxy.host.era import Connection, discover_result, initialize_result, shape_result
from gatekeeper.proxy.host.params import check_params
from gatekeeper.proxy.host.stdio import HostIn, HostOut, host_stdio
from gatekeeper.proxy.protocol import mcp as w
from gatekeeper.proxy.protocol.era import Rejection
from gatekeeper.proxy.protocol.rpc import RpcError, correlation_key, valid_id

if TYPE_CHECKING:
    from gatekeeper.proxy.routing import Proxy

log = logging.getLogger("gatekeeper.proxy.hostlean")


def encode(message: Message) -> bytes:
    """One line for the host. orjson first; values it cannot write (integers beyond 64 bits, which
    the oracle keeps exact) go through ``json``, as the SDK's dump writes them."""
    try:
        return orjson.dumps(message) + b"\n"
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


LISTENED: Final = {
    "tools": ("toolsListChanged", "notifications/tools/list_changed"),
    "resources": ("resourcesListChanged", "notifications/resources/list_changed"),
    "prompts": ("promptsListChanged", "notifications/prompts/list_changed"),
}
"""The proxy's list changes (``Proxy.bus``): the listen filter key that asks for each, and its notification."""


LISTEN_LIMIT: Final = 1024
"""Listen streams one host may hold open at once (the SDK's ``ListenHandler`` default); more: -32603."""
LISTEN_BACKLOG: Final = 1024
"""Events waiting for a host that does not read its listen stream; at the cap the stream ends (as the SDK's)."""
TRUE_WORDS: Final = frozenset({"1", "true", "t", "yes", "y", "on"})
"""What the SDK's lax bool reads as true (a listen filter the SDK's validator let through)."""


def honoured_filter(asked: Any) -> Message:
    """The listen filter the ack echoes: each requested kind, true; resource URIs as given (the SDK's
    ``_honored_subset``; whether an event ever fires depends on what the proxy publishes)."""
    asked = asked if isinstance(asked, dict) else {}
    out: Message = {key: True for key, _ in LISTENED.values() if str(asked.get(key)).lower() in TRUE_WORDS}
    uris = asked.get("resourceSubscriptions")
    if uris:
        out["resourceSubscriptions"] = list(uris)
    return out


def notice(method: str, params: Message | None = None) -> Message:
    message: Message = {"jsonrpc": w.JSONRPC_VERSION, "method": method}
    if params is not None:
        message["params"] = params
    return message


class HostState:
    """What ``Proxy`` asks of ``proxy.host``: the era, whether the handshake is done, list_changed
    and log lines for a handshake-era host."""

    def __init__(self, host: HostSession) -> None:
        self._host = host

    @property
    def protocol_version(self) -> str:
        connection = self._host.connection
        return w.LATEST_MODERN_VERSION if connection.modern else connection.version

    @property
    def client_params(self) -> Any:
        return self._host.client_info if self._host.connection.ready else None

    async def send_tool_list_changed(self) -> None:
        await self._host.send(notice("notifications/tools/list_changed"))

    async def send_resource_list_changed(self) -> None:
        await self._host.send(notice("notifications/resources/list_changed"))

    async def send_prompt_list_changed(self) -> None:
        await self._host.send(notice("notifications/prompts/list_changed"))

    async def send_log_message(self, level: str, data: Any, logger: str | None, related_request_id: Any) -> None:
        """A child's log line: a handshake-era host gets each; on 2026-07-28 only the request it is
        related to, if that request opted in to its level (``_meta`` logLevel)."""
        if self._host.connection.modern and level not in self._host.opted_in(related_request_id):
            return
        params: Message = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self._host.send(notice("notifications/message", params))


def rejected(rejection: Rejection) -> RpcError:
    return RpcError(rejection.code, rejection.message, rejection.data)


def sdk_error(exc: Exception) -> RpcError | None:
    """An SDK ``MCPError`` that got past a url server's adaptor (proxy/servers/url/sdkclient.py turns the ones it
    sees into ``RpcError``) as the answer it stands for.

    Read from ``sys.modules``, never imported: if the SDK is not loaded, nothing raised its error."""
    exceptions = sys.modules.get("mcp.shared.exceptions")
    if exceptions is not None and isinstance(exc, exceptions.MCPError):
        return RpcError(exc.code, exc.message, exc.data)
    return None


def dumped(result: Any) -> Message:
    """A handler's answer as a wire dict (the SDK runner's ``_dump_result``)."""
    if result is None:
        return {}
    if isinstance(result, dict):
        return dict(result)
    return cast(Message, result.model_dump(by_alias=True, mode="json", exclude_none=True))


class HostSession:
    """One host connection served by our own dispatcher, in front of ``proxy``'s handlers."""

    def __init__(self, proxy: Proxy, out: HostOut) -> None:
        self.proxy, self.out = proxy, out
        self.connection = Connection()
        self.client_info: Any = None  # from initialize (a handshake-era host); never trusted
        self.client_capabilities: Any = None
        self.rpc = HostRpc(self.send, self.on_request, self.on_notify)
        self.listening: set[Any] = set()  # the open listen streams' event inboxes
        self.completions: bool | None = None  # advertised or not: decided by the first initialize/discover
        self.deciding = anyio.Lock()
        proxy.host = HostState(self)

    async def send(self, message: Message) -> None:
        self.out.write(encode(message))
        await self.out.drain()

    def opted_in(self, request_id: Any) -> tuple[str, ...]:
        """The log levels an in-flight 2026-07-28 request asked for (none: it asked for none, or is over)."""
        flight = self.rpc.in_flight.get(correlation_key(request_id)) if valid_id(request_id) else None
        meta = (flight.request.params or {}).get("_meta") if flight is not None else None
        asked = meta.get(w.LOG_LEVEL_META_KEY) if isinstance(meta, dict) else None
        return w.LEVELS[w.LEVELS.index(asked) :] if asked in w.LEVELS else ()

    async def serve(self, host_in: HostIn) -> None:
        """Until the end of input; what is in flight then is answered -32000 (``HostRpc``)."""
        await self.rpc.serve(self.messages(host_in))

    async def messages(self, host_in: HostIn) -> AsyncIterator[Message]:
        """The host's messages in order; a line refused on reading is answered and recorded here."""
        while (item := await host_in.take()) is not None:
            line, size = item
            if not line.strip():
                continue  # a blank line is framing, not a message
            outcome = parse.parse(line, size=len(line) if size is None else size, limit=host_in.limit)
            if isinstance(outcome, dict):
                yield outcome
                continue
            log.warning("refused a message from the host: %s (%d bytes)", outcome.reason, outcome.size)
            await self.send(outcome.response())
            try:
                await self.proxy.wire_refused(outcome.payload())
            except Exception:
                log.exception("could not report a refused message")

    async def on_notify(self, method: str, params: Message | None) -> None:
        self.connection.notified(method)

    async def on_request(self, request: Request) -> Message:
        """Route, check, gate, answer, shape: the order the SDK server refuses in."""
        method, params = request.method, request.params
        version = self.connection.route(method, params)
        if isinstance(version, Rejection):
            raise rejected(version)
        self.proxy.host_era.heard(version, True)
        check_params(method, version, params)
        gate = self.connection.gate(method)
        if gate is not None:
            raise rejected(gate)
        try:
            result = await self.answer(request, version)
        except Exception as exc:
            raise sdk_error(exc) or exc from None
        return shape_result(method, version, result)

    async def answer(self, request: Request, version: str) -> Message:
        """The unshaped result of a checked request."""
        method, params = request.method, request.params or {}
        proxy = self.proxy
        if method == "initialize":
            self.client_info, self.client_capabilities = params.get("clientInfo"), params.get("capabilities")
            result = initialize_result(params["protocolVersion"], completions=await self.completions_offered())
            self.connection.initialized(params["protocolVersion"])
            return result
        if method == "server/discover":
            return discover_result(completions=await self.completions_offered())
        if method == "ping":
            return {}
        if method == "logging/setLevel":
            proxy.log_level = params["level"]
            return {}
        if method == "tools/list":
            return await proxy.listing.list_tools(cast(Any, None), None)
        if method == "subscriptions/listen":
            return await self.listen(request)
        if method == "tools/call":
            return dumped(await proxy.call(self.host_call(request, version), params["name"]))
        return dumped(await self.passthrough(method, params))

    async def listen(self, request: Request) -> Message:
        """A 2026-07-28 listen stream: acknowledged, then the asked-for list changes, until cancelled
        (or its backlog is full: the host listens again and lists again; nothing is replayed)."""
        if len(self.listening) >= LISTEN_LIMIT:
            raise RpcError(w.INTERNAL_ERROR, "Subscription limit reached")
        honoured = honoured_filter((request.params or {}).get("notifications"))
        tag = {w.SUBSCRIPTION_ID_META_KEY: request.id}
        events_in, events_out = anyio.create_memory_object_stream[str](LISTEN_BACKLOG)

        def heard(what: str) -> None:
            try:
                events_in.send_nowait(what)
            except anyio.WouldBlock:
                log.warning("listen stream %r backlog full; ending the stream", request.id)
                self.listening.discard(events_in)
                events_in.close()
            except anyio.ClosedResourceError:
                pass

        unsubscribe = self.proxy.bus.subscribe(heard)
        self.listening.add(events_in)
        try:
            await self.send(
                notice("notifications/subscriptions/acknowledged", {"notifications": honoured, "_meta": tag})
            )
            async for name in events_out:
                key, method = LISTENED.get(name, ("", ""))
                if key in honoured:
                    await self.send(notice(method, {"_meta": tag}))
        finally:
            unsubscribe()
            self.listening.discard(events_in)
            events_in.close()
        return {"_meta": tag}

    async def completions_offered(self) -> bool:
        """Whether this connection's ``initialize``/``server/discover`` answers advertise completions:
        decided once (the first such request waits for the children to settle), then the same."""
        async with self.deciding:
            if self.completions is None:
                probe: Message = {"capabilities": {"completions": {}}}
                await self.proxy.completions.advertise(probe)
                self.completions = "completions" in probe["capabilities"]
            return self.completions

    async def passthrough(self, method: str, params: Message) -> Any:
        """Resources, prompts and completion: the proxy's handlers take the checked wire params as they are."""
        through = self.proxy.passthrough
        kinds: dict[str, Any] = {
            "resources/list": through.list_resources,
            "resources/templates/list": through.list_resource_templates,
            "resources/read": through.read_resource,
            "prompts/list": through.list_prompts,
            "prompts/get": through.get_prompt,
            "completion/complete": self.proxy.completions.complete,
        }
        return await kinds[method](params)

    def host_call(self, request: Request, version: str) -> HostCall:
        """What the domain reads of this request; who asked comes from the envelope or ``initialize``."""
        params = request.params or {}
        found = params.get("_meta")
        meta: Message = found if isinstance(found, dict) else {}
        info, caps = self.client_info, self.client_capabilities
        if self.connection.modern:
            info, caps = meta.get(w.CLIENT_INFO_META_KEY), meta.get(w.CLIENT_CAPABILITIES_META_KEY)
        return HostCall(
            protocol_version=version,
            client_info=info if isinstance(info, dict) else None,
            client_capabilities=caps if isinstance(caps, dict) else None,
            params=dict(params),
            meta=dict(meta),
            request_id=request.id,
            report=request.progress,
        )


async def serve_host(proxy: Proxy) -> None:
    """Serve the host on stdio until its input ends; then the children end (the proxy's lifespan)."""
    log_on = logging.getLogger("gatekeeper.proxy")
    log_on.info("host side: lean")
    async with host_stdio(proxy.wire_refused, proxy.line_limit(), proxy.fast.host_line) as (host_in, out):
        proxy.fast.attach(out)
        sys.stdout = sys.stderr  # a stray print() must never reach the wire (see shared notes)
        async with proxy.lifespan():
            await HostSession(proxy, out).serve(host_in)
    log_on.info("host side ended; %s", sdk_note())


def sdk_note() -> str:
    """Whether this session loaded the MCP SDK, for the log: a url server, or a host line or params only
    the SDK's models could judge, load it; nothing else should (issue 12: start-up time and memory)."""
    loaded = sorted(name for name in ("mcp", "mcp_types") if name in sys.modules)
    return f"the MCP SDK was loaded ({', '.join(loaded)})" if loaded else "the MCP SDK was never loaded"

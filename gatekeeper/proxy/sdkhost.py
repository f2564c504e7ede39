"""The host side on the MCP SDK's ``Server`` (``GATEKEEPER_PROXY_HOST=sdk``), kept apart from ``Proxy``.

Why its own module: the SDK server costs ~1 s of start-up and ~40 MiB (issue 12), so only this host
side imports it; ``Proxy`` and the lean host side (proxy/hostlean.py) do not. The SDK server
answers the handshake, the era lock, the envelope checks and params validation; this module hands
the checked requests to the ``Proxy``'s handlers and relays list changes to its listen handler.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

from mcp import MCPError, types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.subscriptions import (
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from pydantic import ValidationError

from gatekeeper import __version__
from gatekeeper.proxy.childface import RpcError
from gatekeeper.proxy.hostcall import HostCall
from gatekeeper.proxy.hostera import INSTRUCTIONS
from gatekeeper.proxy.listchanges import Changed
from gatekeeper.proxy.mcpwire import ToolAnswer
from gatekeeper.proxy.sdkstdio import host_stdio

if TYPE_CHECKING:
    from gatekeeper.proxy.server import Proxy

log = logging.getLogger("gatekeeper.proxy")

EVENTS: dict[Changed, type[ToolsListChanged | ResourcesListChanged | PromptsListChanged]] = {
    "tools": ToolsListChanged,
    "resources": ResourcesListChanged,
    "prompts": PromptsListChanged,
}
"""The proxy's list changes as the SDK's listen handler wants them."""


class SdkHost:
    """The SDK ``Server`` in front of one ``Proxy``: its handlers registered, its middleware ours."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.server: Server[Any] = Server(
            "gatekeeper",
            version=__version__,
            instructions=INSTRUCTIONS,
            lifespan=self._lifespan,
            # These two answer plain wire dicts, which the SDK server takes and sieves per era like
            # a model (its runner's _dump_result); its annotations name only the models.
            on_list_tools=cast(Any, proxy.listing.list_tools),
            on_call_tool=cast(Any, self.call_tool),
            on_subscriptions_listen=ListenHandler(cast(Any, self)),
            # The rest take the wire params and answer wire dicts too: the SDK's checked params are
            # dumped back to the wire shape for them.
            on_list_resources=on_wire(proxy.passthrough.list_resources),
            on_list_resource_templates=on_wire(proxy.passthrough.list_resource_templates),
            on_read_resource=on_wire(proxy.passthrough.read_resource),
            on_list_prompts=on_wire(proxy.passthrough.list_prompts),
            on_get_prompt=on_wire(proxy.passthrough.get_prompt),
            on_completion=on_wire(proxy.completions.complete),
            on_set_logging_level=self._set_log_level,
        )
        self.server.middleware.append(self._middleware)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        """The SDK listen handler's bus: the proxy's own list changes (proxy/listchanges.py) as its events."""
        return self.proxy.bus.subscribe(lambda what: listener(EVENTS[what]()))

    async def publish(self, event: ServerEvent) -> None:
        raise NotImplementedError("the proxy publishes on Proxy.bus")

    @asynccontextmanager
    async def _lifespan(self, _server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with self.proxy.lifespan():
            yield {}

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options(
            NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True)
        )

    async def run(self, read: Any, write: Any) -> None:
        """Serve until the host's input ends; leaving the lifespan ends the children (proxy/child.py)."""
        await self.server.run(read, write, self.initialization_options())

    async def _set_log_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        """A 2025 host's ``logging/setLevel``: lines below it are no longer forwarded, and fast calls
        ask 2026 children for no more than it (``eras.ask_for``)."""
        self.proxy.log_level = params.level
        return types.EmptyResult()

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> ToolAnswer | dict[str, Any]:
        return await self.proxy.call(host_call(ctx), params.name)

    async def _middleware(self, ctx: ServerRequestContext[Any], call_next: Callable[..., Awaitable[Any]]) -> Any:
        """Remember the host session, and its era from its first request (proxy/childera.py); say whether
        completions are offered (initialize, server/discover);
        turn an unexpected exception into a plain error, logged in full."""
        proxy = self.proxy
        proxy.host = ctx.session
        proxy.host_era.heard(ctx.protocol_version, ctx.request_id is not None)
        try:
            result = await call_next(ctx)
            if ctx.method in ("initialize", "server/discover"):
                await proxy.completions.advertise(result)
            return result
        except MCPError:
            raise
        except RpcError as exc:  # the proxy's own JSON-RPC error (proxy/childface.py), as the SDK's
            raise MCPError(exc.code, exc.message, exc.data) from None
        except ValidationError as exc:  # the host sent params of the wrong shape
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors())
            raise MCPError(types.INVALID_PARAMS, f"invalid params for {ctx.method}: {problems}") from None
        except Exception as exc:
            log.error("%s failed", ctx.method, exc_info=exc)
            raise MCPError(
                types.INTERNAL_ERROR, f"Gatekeeper internal error in {ctx.method}; details are in its log"
            ) from None


def on_wire(handler: Callable[[Any], Awaitable[Any]]) -> Any:
    """A handler of wire params, registered on the SDK server (which hands it its params model)."""

    async def registered(ctx: ServerRequestContext[Any], params: Any) -> Any:
        return await handler(
            None if params is None else params.model_dump(mode="json", by_alias=True, exclude_none=True)
        )

    return registered


def host_call(ctx: ServerRequestContext[Any]) -> HostCall:
    """What the domain reads of a host's request (proxy/hostcall.py), taken from the SDK's context."""
    session = ctx.session
    info = session.client_params.client_info if session.client_params else None
    caps = session.client_capabilities
    return HostCall(
        protocol_version=ctx.protocol_version,
        client_info=None if info is None else info.model_dump(mode="json", by_alias=True, exclude_none=True),
        client_capabilities=None if caps is None else caps.model_dump(mode="json", by_alias=True, exclude_none=True),
        params=dict(ctx.params or {}),
        meta=dict(ctx.meta or {}),
        request_id=ctx.request_id,
        report=session.report_progress,
    )


async def serve_sdk(proxy: Proxy) -> None:
    """Serve the host on stdio through the SDK server until its input ends; then the children end."""
    log.info("host side: sdk (GATEKEEPER_PROXY_HOST=sdk)")
    async with host_stdio(proxy.wire_refused, proxy.line_limit(), proxy.fast.host_line) as (read, write, out):
        proxy.fast.attach(out)
        sys.stdout = sys.stderr  # a stray print() must never reach the wire (see shared notes)
        await SdkHost(proxy).run(read, write)

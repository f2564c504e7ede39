"""The SDK 2.3 ``Server`` configured as Gatekeeper's host side once was (proxy/sdkhost.py, deleted
with the ``GATEKEEPER_PROXY_HOST=sdk`` switch): the oracle tests/test_hostera.py holds our own host
side (proxy/host/era.py, proxy/session.py) to.

The same name, version, instructions, list-change capabilities, handlers (the ``Proxy``'s own) and
middleware (error mapping, the completions advertisement), so what the SDK answers is what the
proxy answered when the SDK served its host. Only tests import it: the product no longer does.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

from mcp import MCPError, types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.subscriptions import (
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import ValidationError

from gatekeeper import __version__
from gatekeeper.proxy.host.call import HostCall
from gatekeeper.proxy.host.era import INSTRUCTIONS
from gatekeeper.proxy.listchanges import Changed
from gatekeeper.proxy.protocol.mcp import ToolAnswer
from gatekeeper.proxy.protocol.rpc import RpcError
from gatekeeper.proxy.routing import Proxy

log = logging.getLogger("tests.sdk_oracle_host")

EVENTS: dict[Changed, type[ToolsListChanged | ResourcesListChanged | PromptsListChanged]] = {
    "tools": ToolsListChanged,
    "resources": ResourcesListChanged,
    "prompts": PromptsListChanged,
}
"""The proxy's list changes as the SDK's listen handler wants them."""


class SdkOracleHost:
    """The SDK ``Server`` in front of one ``Proxy``: its handlers registered, its middleware as Gatekeeper's was."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        with warnings.catch_warnings():
            # registering logging/setLevel is deprecated from 2026-07-28; Gatekeeper's server did register it
            warnings.filterwarnings("ignore", "The logging capability is deprecated", MCPDeprecationWarning)
            self.server: Server[Any] = Server(
                "gatekeeper",
                version=__version__,
                instructions=INSTRUCTIONS,
                lifespan=self._lifespan,
                on_list_tools=cast(Any, proxy.listing.list_tools),
                on_call_tool=cast(Any, self.call_tool),
                on_subscriptions_listen=ListenHandler(cast(Any, self)),
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
        """The SDK listen handler's bus: the proxy's own list changes as its events."""
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

    async def _set_log_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self.proxy.log_level = params.level
        return types.EmptyResult()

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> ToolAnswer | dict[str, Any]:
        return await self.proxy.call(host_call(ctx), params.name)

    async def _middleware(self, ctx: ServerRequestContext[Any], call_next: Callable[..., Awaitable[Any]]) -> Any:
        """The host session and era; completions advertised or not; an unexpected exception as a plain error."""
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
        except RpcError as exc:
            raise MCPError(exc.code, exc.message, exc.data) from None
        except ValidationError as exc:
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
    """What the domain reads of a host's request, taken from the SDK's context."""
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

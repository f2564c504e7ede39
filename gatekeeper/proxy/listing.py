"""What each downstream server lists, kept current, and the host's ``tools/list`` built from it.

A server's tools are listed again whenever it restarted (a new generation) or said its list
changed; each exposed tool is checked against its pinned definition in the store. A broken
server is left out of the host's listing, not fatal; only when every server fails is the
listing an error.

The SDK client gives pydantic ``Tool`` models; they become plain wire dicts here, at the edge,
with exactly the dump pin digests were always taken of (``wire_tool``), so the catalog and the
pins never see a model and a digest is byte for byte what it was.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
from mcp import Client, MCPError, types
from mcp.server import ServerRequestContext

from gatekeeper.proxy.audit import Audit
from gatekeeper.proxy.catalog import Catalog, definition
from gatekeeper.proxy.downstream import Downstream, DownstreamGone, DownstreamUnavailable
from gatekeeper.proxy.mcpwire import Tool
from gatekeeper.store import events as ev

log = logging.getLogger("gatekeeper.proxy")
WHY_CHARS = 500  # of a broken server's first error line, kept in the tools_listed_without event


class ToolListing:
    """The catalog's view of each downstream's tools, refreshed per generation."""

    def __init__(self, catalog: Catalog, downstreams: dict[str, Downstream], audit: Audit) -> None:
        self.catalog = catalog
        self.downstreams = downstreams
        self.audit = audit
        self.listed_generation: dict[str, int] = {}
        self._refresh_lock = {name: anyio.Lock() for name in downstreams}
        self._last_missing: list[str] = []  # servers left out of the last tools/list

    async def refresh(self, downstream: Downstream) -> None:
        """List a server's tools and check each exposed one against its pinned definition."""
        async with self._refresh_lock[downstream.name]:
            generation = downstream.generation
            tools: dict[str, Tool] = {}
            cursor = None
            while True:
                page = await downstream.call(_page(cursor))
                tools.update({t.name: wire_tool(t) for t in page.tools})
                if (cursor := page.next_cursor) is None:
                    break
            self.catalog.listed[downstream.name] = tools
            definitions = {name: definition(tool) for name, tool in self.catalog.exposed_of(downstream.name).items()}
            self.catalog.pinned_ok[downstream.name] = await self.audit.db(
                self.audit.store.observe_tools, downstream.name, definitions, self.audit.actor
            )
            self.listed_generation[downstream.name] = generation

    async def ensure(self, downstream: Downstream) -> None:
        """Wait for the server to be up, and list its tools if this generation has not been listed."""
        await downstream.ready()
        if self.listed_generation.get(downstream.name) != downstream.generation:
            await self.refresh(downstream)

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> dict[str, Any]:
        """Every healthy server's tools. A broken server is logged and recorded, not fatal: its tools
        answer with why it is not available. Only when no server works is the listing an error."""
        problems: dict[str, str] = {}

        async def one(downstream: Downstream) -> None:
            try:
                await self.ensure(downstream)
            except (DownstreamUnavailable, DownstreamGone) as exc:
                problems[downstream.name] = str(exc)
            except MCPError as exc:
                problems[downstream.name] = f"downstream server '{downstream.name}' failed to list its tools: {exc}"

        async with anyio.create_task_group() as tg:
            for downstream in self.downstreams.values():
                tg.start_soon(one, downstream)
        if problems and len(problems) == len(self.downstreams):
            raise MCPError(types.INTERNAL_ERROR, "\n".join(problems[name] for name in sorted(problems)))
        await self._report_missing(problems)
        tools = [t for t in self.catalog.host_tools() if self._server_of(t) not in problems]
        return {"ttlMs": 0, "cacheScope": "private", "tools": tools, "resultType": "complete"}  # as ListToolsResult

    def _server_of(self, tool: Tool) -> str | None:
        route = self.catalog.route(tool["name"])
        return route.server if route else None

    async def _report_missing(self, problems: dict[str, str]) -> None:
        """Log and record which servers' tools a listing lacks (once per change, not per listing)."""
        missing = sorted(problems)
        if missing == self._last_missing:
            return
        self._last_missing = missing
        if not missing:
            return
        for name in missing:
            log.warning("tools/list without %s: %s", name, problems[name])
        await self.audit.event(
            ev.TOOLS_LISTED_WITHOUT,
            {"servers": missing, "why": {name: problems[name].split("\n", 1)[0][:WHY_CHARS] for name in missing}},
        )


def _page(cursor: str | None) -> Callable[[Client], Awaitable[types.ListToolsResult]]:
    """One ``tools/list`` page request, bound to its cursor now (not when the loop has moved on)."""
    return lambda client: client.list_tools(cursor=cursor)


def wire_tool(tool: types.Tool) -> Tool:
    """A listed tool as its wire dict: the one dump pin digests are taken of (proxy/catalog.py)."""
    return cast(Tool, tool.model_dump(mode="json", by_alias=True, exclude_none=True))

"""What each downstream server lists, kept current, and the host's ``tools/list`` built from it.

A server's tools are listed again whenever it restarted (a new generation) or said its list
changed; each exposed tool is checked against its pinned definition in the store. A broken
server is left out of the host's listing, not fatal; only when every server fails is the
listing an error.

A server's listing comes as raw wire dicts (proxy/servers/face.py); each tool is kept as exactly
the dump pin digests were always taken of (the SDK's ``Tool`` dumped, rebuilt without it by
proxy/tooldef.py), so a digest is byte for byte what it was.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import anyio

from gatekeeper.proxy.audit import Audit
from gatekeeper.proxy.catalog import Catalog, definition
from gatekeeper.proxy.protocol.mcp import INTERNAL_ERROR, Tool
from gatekeeper.proxy.protocol.rpc import Json, RpcError
from gatekeeper.proxy.servers.downstream import Downstream
from gatekeeper.proxy.servers.face import DownstreamGone, DownstreamUnavailable
from gatekeeper.proxy.tooldef import tool_dump
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
                page = await downstream.request("tools/list", None if cursor is None else {"cursor": cursor})
                listed = page.get("tools")
                if not isinstance(listed, list):
                    raise ListingError(f"its tools/list answer has no list of tools: {cut_repr(page)}")
                version = downstream.client.protocol_version if downstream.client else None
                for raw in listed:
                    tool = cast(Tool, _dumped(raw, version))
                    tools[tool["name"]] = tool
                if (cursor := _cursor(page)) is None:
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

    async def list_tools(self, ctx: Any = None, params: Any = None) -> dict[str, Any]:
        """Every healthy server's tools. A broken server is logged and recorded, not fatal: its tools
        answer with why it is not available. Only when no server works is the listing an error.
        ``ctx`` and ``params`` are unused: one page holds every tool (the host side passes its own)."""
        problems: dict[str, str] = {}

        async def one(downstream: Downstream) -> None:
            try:
                await self.ensure(downstream)
            except (DownstreamUnavailable, DownstreamGone) as exc:
                problems[downstream.name] = str(exc)
            except (RpcError, ListingError) as exc:
                problems[downstream.name] = f"downstream server '{downstream.name}' failed to list its tools: {exc}"

        async with anyio.create_task_group() as tg:
            for downstream in self.downstreams.values():
                tg.start_soon(one, downstream)
        if problems and len(problems) == len(self.downstreams):
            raise RpcError(INTERNAL_ERROR, "\n".join(problems[name] for name in sorted(problems)))
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


class ListingError(Exception):
    """A server's listing is not one the SDK client would have taken (the message says what)."""


def cut_repr(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _dumped(raw: Any, version: str | None) -> Json:
    """A listed tool as the SDK's ``Tool`` dumps it; one it would refuse fails the listing, as it did."""
    try:
        return tool_dump(raw, version)
    except ValueError as exc:  # pydantic's ValidationError
        raise ListingError(f"a tool it lists is not a valid MCP tool: {str(exc).splitlines()[0]}") from None


def _cursor(page: Json) -> str | None:
    """The next page's cursor (the SDK's ``nextCursor``: a string, or none)."""
    cursor = page.get("nextCursor")
    if cursor is not None and not isinstance(cursor, str):
        raise ListingError(f"its tools/list answer has a nextCursor that is not a string: {cut_repr(cursor)}")
    return cursor

"""Resources, resource templates and prompts: passed through untouched (they are reads).

With several servers, lists are merged in policy order, prompt names get the server's prefix
like tool names do, and a resource is read from the server that listed it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp import Client, MCPError, types
from mcp.server import ServerRequestContext

from gatekeeper.policy import Policy
from gatekeeper.proxy.downstream import Downstream, DownstreamGone, DownstreamUnavailable

T = TypeVar("T")


def strip_stamp(result: T) -> T:
    """Drop the child's serverInfo stamp: on 2026 hosts it would win over ours."""
    from mcp.types import SERVER_INFO_META_KEY

    meta = getattr(result, "meta", None)
    if meta and SERVER_INFO_META_KEY in meta:
        setattr(result, "meta", {k: v for k, v in meta.items() if k != SERVER_INFO_META_KEY} or None)  # noqa: B010
    return result


class Passthrough:
    def __init__(self, policy: Policy, downstreams: dict[str, Downstream]) -> None:
        self.policy = policy
        self.downstreams = downstreams
        self.resource_owner: dict[str, str] = {}
        self.template_owner: dict[str, str] = {}  # uri template -> the server that listed it

    async def _each(self, fn: Callable[[Downstream], Awaitable[list[T]]]) -> list[T]:
        """Merge one list over every server, in policy order; a failure names the server."""
        merged: list[T] = []
        for downstream in self.downstreams.values():
            try:
                await downstream.ready()
                merged.extend(await fn(downstream))
            except (DownstreamUnavailable, DownstreamGone) as exc:
                raise MCPError(types.INTERNAL_ERROR, str(exc)) from None
        return merged

    async def _pages(self, downstream: Downstream, method: str, attr: str) -> list[Any]:
        items, cursor = [], None
        while True:
            page = await downstream.call(_page(method, cursor))
            items.extend(getattr(page, attr))
            if (cursor := page.next_cursor) is None:
                return items

    def _prefix(self, server: str) -> str:
        return "" if len(self.downstreams) == 1 else f"{self.policy.servers[server].prefix or server}__"

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        async def one(d: Downstream) -> list[types.Resource]:
            resources = await self._pages(d, "list_resources", "resources")
            for r in resources:
                self.resource_owner[str(r.uri)] = d.name
            return resources

        return types.ListResourcesResult(resources=await self._each(one))

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        async def one(d: Downstream) -> list[types.ResourceTemplate]:
            templates = await self._pages(d, "list_resource_templates", "resource_templates")
            for t in templates:
                self.template_owner[t.uri_template] = d.name
            return templates

        return types.ListResourceTemplatesResult(resource_templates=await self._each(one))

    async def learn_templates(self) -> None:
        """Note who lists which resource template, from every server that is up (the others are skipped)."""
        for downstream in self.downstreams.values():
            if downstream.client is None:
                continue
            try:
                for t in await self._pages(downstream, "list_resource_templates", "resource_templates"):
                    self.template_owner[t.uri_template] = downstream.name
            except (MCPError, DownstreamUnavailable, DownstreamGone):
                continue

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        owner = self.resource_owner.get(uri)
        candidates = [self.downstreams[owner]] if owner else list(self.downstreams.values())
        last: MCPError | None = None
        for downstream in candidates:
            try:
                return strip_stamp(await downstream.call(lambda c: c.read_resource(params.uri)))
            except MCPError as exc:
                last = exc
            except (DownstreamUnavailable, DownstreamGone) as exc:
                last = MCPError(types.INTERNAL_ERROR, str(exc))
        raise last or MCPError(types.INVALID_PARAMS, f"no downstream server has the resource {uri}")

    async def list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        async def one(d: Downstream) -> list[types.Prompt]:
            prompts = await self._pages(d, "list_prompts", "prompts")
            prefix = self._prefix(d.name)
            return [p.model_copy(update={"name": prefix + p.name}) for p in prompts]

        return types.ListPromptsResult(prompts=await self._each(one))

    async def get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        owner = self.owner(params.name)
        if owner is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name!r}")
        downstream, name_there = owner
        try:
            return strip_stamp(await downstream.call(lambda c: c.get_prompt(name_there, params.arguments)))
        except (DownstreamUnavailable, DownstreamGone) as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from None

    def owner(self, prompt: str) -> tuple[Downstream, str] | None:
        """The server a (prefixed) prompt name belongs to, and the prompt's name there."""
        for name, downstream in self.downstreams.items():
            prefix = self._prefix(name)
            if prompt.startswith(prefix):
                return downstream, prompt.removeprefix(prefix)
        return None


def _page(method: str, cursor: str | None) -> Callable[[Client], Awaitable[Any]]:
    """One page request of a list method, bound to its cursor now (not when the loop has moved on)."""
    return lambda client: getattr(client, method)(cursor=cursor)

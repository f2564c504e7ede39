"""Resources, resource templates and prompts: passed through untouched (they are reads).

With several servers, lists are merged in policy order, prompt names get the server's prefix
like tool names do, and a resource is read from the server that listed it. Each handler takes the
host's wire params (a dict the host side has checked) and returns a wire dict; a JSON-RPC error
for the host is an ``RpcError``.

Resource URIs are matched as the servers list them (the SDK used to normalise both sides with
pydantic's ``AnyUrl``); a URI no server is known to have listed is tried on each server in turn.
"""

from __future__ import annotations

from typing import Any

from gatekeeper.policy import Policy
from gatekeeper.proxy.protocol.mcp import INTERNAL_ERROR, INVALID_PARAMS, SERVER_INFO_META_KEY
from gatekeeper.proxy.protocol.rpc import Json, RpcError
from gatekeeper.proxy.servers.downstream import Downstream
from gatekeeper.proxy.servers.face import DownstreamGone, DownstreamUnavailable


def strip_stamp(result: Json) -> Json:
    """Drop the child's serverInfo stamp: on 2026 hosts it would win over ours."""
    meta = result.get("_meta")
    if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
        rest = {k: v for k, v in meta.items() if k != SERVER_INFO_META_KEY}
        result = {k: v for k, v in result.items() if k != "_meta"}
        if rest:
            result["_meta"] = rest
    return result


def listed(key: str, items: list[Any]) -> Json:
    """A merged list result as the SDK's (version-free) list models dump: the cache hints a 2026
    result must carry, ``resultType``; the host side sieves it per era."""
    return {"ttlMs": 0, "cacheScope": "private", key: items, "resultType": "complete"}


def _items(page: Json, key: str) -> list[Any]:
    items = page.get(key)
    return items if isinstance(items, list) else []


def _next(page: Json) -> str | None:
    cursor = page.get("nextCursor")
    return cursor if isinstance(cursor, str) else None


class Passthrough:
    def __init__(self, policy: Policy, downstreams: dict[str, Downstream]) -> None:
        self.policy = policy
        self.downstreams = downstreams
        self.resource_owner: dict[str, str] = {}
        self.template_owner: dict[str, str] = {}  # uri template -> the server that listed it

    async def _each(self, method: str, key: str) -> list[tuple[Downstream, Any]]:
        """Merge one list over every server, in policy order; a failure names the server."""
        merged: list[tuple[Downstream, Any]] = []
        for downstream in self.downstreams.values():
            try:
                await downstream.ready()
                merged.extend((downstream, item) for item in await self._pages(downstream, method, key))
            except (DownstreamUnavailable, DownstreamGone) as exc:
                raise RpcError(INTERNAL_ERROR, str(exc)) from None
        return merged

    async def _pages(self, downstream: Downstream, method: str, key: str) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        while True:
            page = await downstream.request(method, None if cursor is None else {"cursor": cursor})
            items.extend(_items(page, key))
            if (cursor := _next(page)) is None:
                return items

    def _prefix(self, server: str) -> str:
        return "" if len(self.downstreams) == 1 else f"{self.policy.servers[server].prefix or server}__"

    async def list_resources(self, params: Json | None = None) -> Json:
        resources = []
        for downstream, resource in await self._each("resources/list", "resources"):
            if isinstance(resource, dict) and isinstance(uri := resource.get("uri"), str):
                self.resource_owner[uri] = downstream.name
            resources.append(resource)
        return listed("resources", resources)

    async def list_resource_templates(self, params: Json | None = None) -> Json:
        templates = []
        for downstream, template in await self._each("resources/templates/list", "resourceTemplates"):
            self._learn_template(downstream, template)
            templates.append(template)
        return listed("resourceTemplates", templates)

    def _learn_template(self, downstream: Downstream, template: Any) -> None:
        if isinstance(template, dict) and isinstance(uri := template.get("uriTemplate"), str):
            self.template_owner[uri] = downstream.name

    async def learn_templates(self) -> None:
        """Note who lists which resource template, from every server that is up (the others are skipped)."""
        for downstream in self.downstreams.values():
            if downstream.client is None:
                continue
            try:
                for t in await self._pages(downstream, "resources/templates/list", "resourceTemplates"):
                    self._learn_template(downstream, t)
            except (RpcError, DownstreamUnavailable, DownstreamGone):
                continue

    async def read_resource(self, params: Json) -> Json:
        uri = str(params["uri"])
        owner = self.resource_owner.get(uri)
        candidates = [self.downstreams[owner]] if owner else list(self.downstreams.values())
        last: RpcError | None = None
        for downstream in candidates:
            try:
                return strip_stamp(await downstream.request("resources/read", {"uri": uri}))
            except RpcError as exc:
                last = exc
            except (DownstreamUnavailable, DownstreamGone) as exc:
                last = RpcError(INTERNAL_ERROR, str(exc))
        raise last or RpcError(INVALID_PARAMS, f"no downstream server has the resource {uri}")

    async def list_prompts(self, params: Json | None = None) -> Json:
        prompts = []
        for downstream, prompt in await self._each("prompts/list", "prompts"):
            if isinstance(prompt, dict) and isinstance(prompt.get("name"), str):
                prompt = {**prompt, "name": self._prefix(downstream.name) + prompt["name"]}
            prompts.append(prompt)
        return listed("prompts", prompts)

    async def get_prompt(self, params: Json) -> Json:
        name = params["name"]
        owner = self.owner(name)
        if owner is None:
            raise RpcError(INVALID_PARAMS, f"unknown prompt {name!r}")
        downstream, name_there = owner
        asked: Json = {"name": name_there}
        if params.get("arguments") is not None:
            asked["arguments"] = params["arguments"]
        try:
            return strip_stamp(await downstream.request("prompts/get", asked))
        except (DownstreamUnavailable, DownstreamGone) as exc:
            raise RpcError(INTERNAL_ERROR, str(exc)) from None

    def owner(self, prompt: str) -> tuple[Downstream, str] | None:
        """The server a (prefixed) prompt name belongs to, and the prompt's name there."""
        for name, downstream in self.downstreams.items():
            prefix = self._prefix(name)
            if prompt.startswith(prefix):
                return downstream, prompt.removeprefix(prefix)
        return None

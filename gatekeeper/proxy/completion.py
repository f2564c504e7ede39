"""``completion/complete``: argument completions from the one server that owns what they are for.

A ``ref/prompt`` goes by the host-facing prompt name (with several servers it carries the
server's prefix: ``Passthrough.owner`` maps it back), a ``ref/resource`` by its URI or URI
template to the server that listed it (``Passthrough.template_owner``, ``resource_owner``;
with one server, that server). A ref that names nothing known, a server without the
``completions`` capability, or a server that is down gets a JSON-RPC error that says which, and
is recorded like the proxy's other refusals. Allowed ones also take the fast path
(``proxy/fast/path.py``, through ``Proxy.fast_completion`` and ``locate`` here).

The host is told ``completions`` is offered when a server of the policy offers it. Capabilities
are fixed at the handshake, so ``advertise`` waits for each server's first start to end, started
or failed: how fast a child starts (an idle machine or a loaded one) never changes the answer,
only when it comes. The one bound is the last resort every call has for a start, ``START_TIMEOUT``
(``GATEKEEPER_START_TIMEOUT``): a server that has neither answered its handshake nor failed by then
is down for the host as for everything else. A server that comes back after a restart without
completions does not change what the host was told (MCP has no notification for capabilities).
"""

from __future__ import annotations

from typing import Any

import anyio

from gatekeeper.proxy.audit import Audit
from gatekeeper.proxy.passthrough import Passthrough, strip_stamp
from gatekeeper.proxy.protocol.mcp import INTERNAL_ERROR, INVALID_PARAMS
from gatekeeper.proxy.protocol.rpc import Json, RpcError
from gatekeeper.proxy.servers.downstream import START_TIMEOUT, Downstream
from gatekeeper.proxy.servers.face import ChildClient, DownstreamGone, DownstreamUnavailable
from gatekeeper.store import events as ev
from gatekeeper.store.bounded import cut

METHOD = "completion/complete"
SETTLE_LIMIT = START_TIMEOUT
"""The last resort on waiting for a server's first start (a handshake never answered): a call's own."""


def offers_completions(client: ChildClient | None) -> bool:
    """The live client's server advertised ``completions``."""
    return client is not None and client.server_capabilities.get("completions") is not None


class Completions:
    """Routes ``completion/complete`` (the host side's handler) and the ``completions`` capability."""

    def __init__(self, passthrough: Passthrough, downstreams: dict[str, Downstream], audit: Audit) -> None:
        self.passthrough = passthrough
        self.downstreams = downstreams
        self.audit = audit

    def locate(self, kind: str, key: str) -> tuple[Downstream, str] | None:
        """The server a ref belongs to and the ref's name (or URI) there; None if none is known."""
        if kind == "ref/prompt":
            return self.passthrough.owner(key)
        owner = self.passthrough.template_owner.get(key) or self.passthrough.resource_owner.get(key)
        if owner is None and len(self.downstreams) == 1:
            owner = next(iter(self.downstreams))
        return None if owner is None else (self.downstreams[owner], key)

    def offered(self) -> bool:
        return any(offers_completions(d.client) for d in self.downstreams.values())

    async def advertise(self, result: Any) -> None:
        """Set or drop ``completions`` in an ``initialize`` or ``server/discover`` result (a wire dict)."""
        capabilities = result.get("capabilities") if isinstance(result, dict) else None
        if not isinstance(capabilities, dict):
            return
        if not self.offered():
            async with anyio.create_task_group() as tg:
                for downstream in self.downstreams.values():
                    tg.start_soon(_settled, downstream)
        if self.offered():
            capabilities["completions"] = {}
        else:
            capabilities.pop("completions", None)

    async def complete(self, params: Json) -> Json:
        """A host's ``completion/complete`` (its params checked by the host side), answered by the
        server that owns the ref, or refused with an ``RpcError`` that says why."""
        ref: Json = params["ref"]
        kind: str = ref["type"]
        key: str = ref["name"] if kind == "ref/prompt" else ref["uri"]
        found = self.locate(kind, key)
        if found is None and kind == "ref/resource":
            await self.passthrough.learn_templates()  # the host may complete before it listed them
            found = self.locate(kind, key)
        if found is None:
            what = "prompt" if kind == "ref/prompt" else "resource or resource template"
            raise await self._refuse(
                INVALID_PARAMS,
                f"no downstream server offers the {what} {cut(key)!r}; "
                f"complete arguments of the {what}s Gatekeeper lists",
                "unknown_ref",
                kind,
                key,
            )
        downstream, key_there = found
        asked: Json = {"ref": {**ref, "name": key_there} if kind == "ref/prompt" else ref}
        asked["argument"] = {"name": params["argument"]["name"], "value": params["argument"]["value"]}
        context = params.get("context")
        if isinstance(context, dict) and context.get("arguments") is not None:
            asked["context"] = {"arguments": context["arguments"]}
        try:
            client = await downstream.ready()
            if not offers_completions(client):
                raise await self._refuse(
                    INVALID_PARAMS,
                    f"downstream server '{downstream.name}' does not offer completions (it does not advertise the "
                    "'completions' capability); fill in the argument without them",
                    "no_completions",
                    kind,
                    key,
                )
            result = await downstream.request(METHOD, asked)
        except (DownstreamUnavailable, DownstreamGone) as exc:
            raise await self._refuse(INTERNAL_ERROR, str(exc), "server_unavailable", kind, key) from None
        return strip_stamp(result)

    async def _refuse(self, code: int, message: str, reason: str, kind: str, key: str) -> RpcError:
        """Record the refusal and return the error that answers it."""
        await self.audit.refused(ev.REQUEST_REFUSED, {"method": METHOD, "reason": reason, "ref": kind, "key": cut(key)})
        return RpcError(code, message)


async def _settled(downstream: Downstream) -> None:
    """Wait until the server's first start is up or failed, however long the child takes (its own
    failure or exit ends the wait, ``SETTLE_LIMIT`` only a hung one); a later discover restarts none."""
    if downstream.generation or downstream.start_failed:
        return
    try:
        await downstream.ready(SETTLE_LIMIT)
    except DownstreamUnavailable:
        return

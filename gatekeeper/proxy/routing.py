"""The host-facing MCP server: routes each request by policy to a downstream server, the store,
or Gatekeeper's own status tool.

One ``Proxy`` serves one host connection over stdio (a host launches one process per use).
It answers the handshake at once; downstream servers start in the background and
``tools/list`` waits for them, bounded. Unexpected failures become tool errors or protocol
errors with a plain message; details go to the log on stderr, never to stdout.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import anyio

from gatekeeper import __version__
from gatekeeper.canonical import new_id
from gatekeeper.home import Home
from gatekeeper.policy import RESERVED_TOOL, Policy
from gatekeeper.proxy.audit import Audit
from gatekeeper.proxy.catalog import Catalog, Route
from gatekeeper.proxy.completion import Completions, offers_completions
from gatekeeper.proxy.fast import rewrite
from gatekeeper.proxy.fast.path import FastPath
from gatekeeper.proxy.fast.rewrite import ChildView
from gatekeeper.proxy.host import parse
from gatekeeper.proxy.host.call import HostCall
from gatekeeper.proxy.listchanges import Changed, ListChanges
from gatekeeper.proxy.listing import ToolListing
from gatekeeper.proxy.passthrough import Passthrough, strip_stamp
from gatekeeper.proxy.protocol.mcp import LEVELS, MODERN_PROTOCOL_VERSIONS, ToolAnswer, tool_error
from gatekeeper.proxy.protocol.rpc import Json, RpcError
from gatekeeper.proxy.servers.downstream import Downstream
from gatekeeper.proxy.servers.era import MATCH, HostEra
from gatekeeper.proxy.servers.face import DownstreamGone, DownstreamUnavailable
from gatekeeper.proxy.status import proposal_status
from gatekeeper.store import events as ev
from gatekeeper.store.backends import DatabaseUnreachable
from gatekeeper.store.bounded import cut

if TYPE_CHECKING:
    from gatekeeper.proxy.proposing import Proposer

log = logging.getLogger("gatekeeper.proxy")
_HOST_META = "io.modelcontextprotocol/"
_PROGRESS_KEYS = frozenset({"progress_token", "progressToken"})  # the SDK's context name; the wire's


class Proxy:
    """One host connection: its downstream servers, and the routing between them and the store.

    The host side (proxy/session.py) calls its handlers."""

    def __init__(self, policy: Policy, home: Home, *, mode: str = MATCH) -> None:
        self.policy = policy
        self.home = home
        self.session_id = new_id()
        self.actor = f"proxy:{self.session_id}"
        self.store = home.store()
        self.audit = Audit(self.store, self.actor)
        self.catalog = Catalog(policy)
        self.bus = ListChanges()  # what a 2026 host's listen streams hear (proxy/listchanges.py)
        self.host: Any = None  # the host's session (session.HostState), once the host side starts
        self.host_era = HostEra()  # what children in "match" mode wait for (proxy/servers/era.py)
        self.active: dict[str, HostCall] = {}  # server -> latest in-flight call (for logs)
        self.downstreams = {
            name: Downstream(
                name,
                config,
                home.log_dir,
                on_message=self._on_child_message,
                on_log=self._on_child_log,
                on_event=self._on_child_event,
                mode=mode,
            )
            for name, config in policy.servers.items()
        }
        self.listing = ToolListing(self.catalog, self.downstreams, self.audit)
        self.passthrough = Passthrough(policy, self.downstreams)
        self.completions = Completions(self.passthrough, self.downstreams, self.audit)
        self._key = home.read_key()  # at start: a missing or exposed key stops the proxy, not a proposal
        self._proposer: Proposer | None = None
        self.fast = FastPath(self)
        self._views: dict[str, ChildView] = {}  # server -> its live client's view
        self.log_level: str | None = None  # set by a 2025 host's logging/setLevel; None: every line

    @property
    def proposer(self) -> Proposer:
        """The propose / wait / hand-off flow, built on the first call that needs it: its modules
        (intake, diff, the store's proposal writer) are start-up time a read-only session never uses."""
        if self._proposer is None:
            from gatekeeper.proxy.proposing import Proposer

            self._proposer = Proposer(self.policy, self.home, self.audit, self.session_id, self._key)
        return self._proposer

    def fast_route(self, name: str, meta: dict[str, Any] | None) -> tuple[Downstream, str, ChildView] | None:
        """Where an allowed call may go as raw JSON-RPC (proxy/fast/path.py), or None for the regular path.

        The same decision as ``_call_tool`` for a plain allowed call to a listed, pinned tool on a
        live child; everything else (proposals, denials, withheld or unlisted tools, our own tool,
        a child not started or not listed yet) stays on the regular path (the host side's dispatch).
        """
        if meta and any(key.startswith(_HOST_META) for key in meta):
            return None  # a 2026 envelope on a 2025 session: the host side answers it
        route = self.catalog.route(name) if name != RESERVED_TOOL else None
        if route is None or route.rule.action != "allow":
            return None
        downstream = self.downstreams[route.server]
        if self.listing.listed_generation.get(route.server) != downstream.generation:
            return None
        if self.catalog.state(route) != "ok":
            return None
        view = self.fast_client(downstream)
        return None if view is None else (downstream, route.tool, view)

    def fast_resource(self, uri: str) -> tuple[Downstream, ChildView] | None:
        """The one server a resource is read from, when ``Passthrough.read_resource`` would try only it."""
        owner = self.passthrough.resource_owner.get(uri)
        if owner is None and len(self.downstreams) == 1:
            owner = next(iter(self.downstreams))
        if owner is None:
            return None  # today's path tries each server in turn
        downstream = self.downstreams[owner]
        view = self.fast_client(downstream)
        return None if view is None else (downstream, view)

    def fast_prompt(self, name: str) -> tuple[Downstream, str, ChildView] | None:
        owner = self.passthrough.owner(name)
        if owner is None:
            return None
        view = self.fast_client(owner[0])
        return None if view is None else (owner[0], owner[1], view)

    def fast_completion(self, kind: str, key: str) -> tuple[Downstream, str, ChildView] | None:
        """Where a ``completion/complete`` goes raw: a known ref on a live server that offers completions."""
        found = self.completions.locate(kind, key)
        if found is None or not offers_completions(found[0].client):
            return None  # the regular path answers (and records) it
        view = self.fast_client(found[0])
        return None if view is None else (found[0], found[1], view)

    def fast_client(self, downstream: Downstream) -> ChildView | None:
        """The live client's era toward this host, when raw forwarding may use it (cached per client).

        None for a host not past its handshake (or, on 2026-07-28, its first request the host side
        answered), a child not live, or eras this module does not translate.
        """
        client, host = downstream.client, self.host
        if client is None or host is None or not downstream.carrier.alive:
            return None
        if host.client_params is None and host.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return None
        view = self._views.get(downstream.name)
        if view is None or view.client is not client or view.host_version != host.protocol_version:
            view = ChildView.of(client, host.protocol_version)
            self._views[downstream.name] = view
        return view if view.usable else None

    def log_levels(self) -> frozenset[str] | None:
        """What a 2025 host lets through (None: it set no level, so every line)."""
        return rewrite.at_or_above(self.log_level)

    def host_version(self) -> str | None:
        """The protocol revision of the host's connection, once the host side has seen a request."""
        return None if self.host is None else cast(str, self.host.protocol_version)

    # -- plumbing ------------------------------------------------------------------------------

    async def _last_flush(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.audit.flush_all()

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Children, audit flushing and their orderly end: what either host side runs inside."""
        async with anyio.create_task_group() as tg:
            for downstream in self.downstreams.values():
                tg.start_soon(self.host_era.supervise, downstream)
            tg.start_soon(self.audit.flush_due_forever)
            await self.audit.event(
                ev.PROXY_STARTED,
                {"servers": sorted(self.downstreams), "policy_digest": self.policy.digest, "version": __version__},
            )
            try:
                yield
            finally:
                async with anyio.create_task_group() as ending:
                    ending.start_soon(self._last_flush)  # alongside the children's ending, not after it
                    for downstream in self.downstreams.values():
                        await downstream.close()
                tg.cancel_scope.cancel()
        self.store.close()

    async def wire_refused(self, payload: dict[str, Any]) -> None:
        """A host line refused on reading (proxy/host/parse.py; the host side has answered it already)."""
        await self.audit.refused(ev.REQUEST_REFUSED, payload)

    def line_limit(self) -> int:
        """The largest message accepted from the host, big enough for any proposal the policy allows."""
        sizes = [
            rule.propose.max_bytes
            for server in self.policy.servers.values()
            for rule in server.tools.values()
            if rule.propose is not None
        ]
        return parse.line_limit(sizes)

    async def _on_child_event(self, kind: str, payload: dict[str, Any]) -> None:
        log.info("%s %s", kind, payload.get("server"))
        await self.audit.event(kind, payload)

    async def _on_child_log(self, downstream: Downstream, params: Json) -> None:
        """A child's ``notifications/message`` params (a valid level and data: proxy/servers/stdio/rpc.py checked),
        to the host as the log of the call in flight on that server, if any."""
        call, session, level = self.active.get(downstream.name), self.host, params.get("level")
        if session is None or level not in (self.log_levels() or LEVELS):
            return
        logger = params.get("logger")
        try:
            await session.send_log_message(
                level,
                params.get("data"),
                logger if isinstance(logger, str) else None,
                related_request_id=call.request_id if call else None,
            )
        except Exception:  # the host may be gone; a log line is not worth failing for
            log.debug("could not forward a log message from %s", downstream.name, exc_info=True)

    async def _on_child_message(self, downstream: Downstream, message: Json | Exception) -> None:
        """A child's notification (``{"method", "params"}``), or a url server's transport problem."""
        if isinstance(message, Exception):
            log.warning("%s: transport problem: %s", downstream.name, message)
            return
        method = message.get("method")
        try:
            if method == "notifications/tools/list_changed":
                await self.listing.refresh(downstream)
                await self._notify_host("tools")
            elif method == "notifications/resources/list_changed":
                await self._notify_host("resources")
            elif method == "notifications/prompts/list_changed":
                await self._notify_host("prompts")
        except Exception:
            log.warning("could not handle %s from %s", method, downstream.name, exc_info=True)

    async def _notify_host(self, what: Changed) -> None:
        """2026 hosts hear it on their listen stream; 2025 hosts get the plain notification."""
        await self.bus.publish(what)
        host = self.host
        if host is not None and host.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            send = {
                "tools": host.send_tool_list_changed,
                "resources": host.send_resource_list_changed,
                "prompts": host.send_prompt_list_changed,
            }[what]
            await send()

    # -- tools -----------------------------------------------------------------------------------

    async def call(self, call: HostCall, name: str) -> ToolAnswer | Json:
        """A ``tools/call`` whose params passed the surface check (``call.params`` is the wire object)."""
        arguments = call.params.get("arguments")  # the parsed wire object: no coercion
        try:
            return await self._call_tool(call, name, arguments)
        except RpcError:  # the child's own error answer: the host gets it as it is
            raise
        except DatabaseUnreachable as exc:  # a team's database server went away: say so, no traceback
            log.warning("tools/call %s: %s", cut(name), exc)
            from gatekeeper.proxy.proposing import unreachable

            return unreachable(exc)
        except Exception:
            log.exception("tools/call %s failed", cut(name))
            return tool_error(f"Gatekeeper hit an internal error handling {name!r}; details are in its log.")

    async def _call_tool(self, call: HostCall, name: str, arguments: Any) -> ToolAnswer | Json:
        if name == RESERVED_TOOL:
            return await proposal_status(self.proposer.database, arguments)
        route = self.catalog.route(name)
        if route is None:
            await self.audit.refused(ev.TOOL_DENIED, {"tool": name, "why": "not allowed or proposed by the policy"})
            return tool_error(
                f"Tool {cut(name)!r} is not available through Gatekeeper: the policy does not allow it. "
                "Use one of the listed tools, or ask the person running Gatekeeper to add it to policy.yaml."
            )
        downstream = self.downstreams[route.server]
        try:
            await self.listing.ensure(downstream)
        except (DownstreamUnavailable, DownstreamGone) as exc:
            return tool_error(str(exc))
        state = self.catalog.state(route)
        if state == "withheld":
            await self.audit.refused(
                ev.TOOL_DENIED, {"tool": name, "server": route.server, "why": "definition changed"}
            )
            return tool_error(
                f"Tool {name!r} is withheld: its definition changed since it was approved. A person must review "
                "the change and run `gatekeeper policy check --accept-changes`."
            )
        if state == "unlisted":
            return tool_error(f"Downstream server {route.server!r} does not offer a tool named {route.tool!r}.")
        if route.rule.action == "propose":
            return await self.proposer.propose(call, route, arguments)
        return await self._forward(call, downstream, route, arguments)

    async def _forward(self, call: HostCall, downstream: Downstream, route: Route, arguments: Any) -> ToolAnswer | Json:
        meta = {k: v for k, v in call.meta.items() if not k.startswith(_HOST_META) and k not in _PROGRESS_KEYS}

        params: Json = {"name": route.tool}
        if arguments is not None:
            params["arguments"] = arguments
        if meta:
            params["_meta"] = meta
        self.active[route.server] = call
        try:
            result = await downstream.request("tools/call", params, cast(Any, call.report))
        except DownstreamGone as exc:
            return tool_error(f"{exc}. It will be restarted on the next call.")
        except DownstreamUnavailable as exc:
            return tool_error(str(exc))
        finally:
            if self.active.get(route.server) is call:
                del self.active[route.server]
        return strip_stamp(result)

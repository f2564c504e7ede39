"""The host-facing MCP server: routes each request by policy to a downstream server, the store,
or Gatekeeper's own status tool.

One ``Proxy`` serves one host connection over stdio (a host launches one process per use).
It answers the handshake at once; downstream servers start in the background and
``tools/list`` waits for them, bounded. Unexpected failures become tool errors or protocol
errors with a plain message; details go to the log on stderr, never to stdout.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp import MCPError, types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from gatekeeper import __version__
from gatekeeper.canonical import new_id
from gatekeeper.errors import InvalidInput
from gatekeeper.home import Home
from gatekeeper.policy import RESERVED_TOOL, Policy
from gatekeeper.proxy import intake, wire
from gatekeeper.proxy.catalog import Catalog, Route, definition
from gatekeeper.proxy.downstream import Downstream, DownstreamGone, DownstreamUnavailable
from gatekeeper.proxy.handoff import HandOff
from gatekeeper.proxy.passthrough import Passthrough, strip_stamp
from gatekeeper.proxy.status import final_result, proposal_status, read_proposal, tool_error, wait_for_outcome
from gatekeeper.store import events as ev
from gatekeeper.store.bounded import bounded, cut
from gatekeeper.store.refusals import Refusals
from gatekeeper.store.store import Store

log = logging.getLogger("gatekeeper.proxy")
T = TypeVar("T")
_HOST_META = "io.modelcontextprotocol/"
_FLUSH_EVERY = 1.0  # seconds between checks for refusal counters whose window has passed


class Proxy:
    def __init__(self, policy: Policy, home: Home, *, mode: str = "auto") -> None:
        self.policy = policy
        self.home = home
        self.session_id = new_id()
        self.actor = f"proxy:{self.session_id}"
        self.store = Store(home.db_path)
        # Every refusal the host can provoke (a bad line, a denied tool, a refused proposal) is
        # attacker-sized and repeatable: bounded fields, identical ones counted (store/refusals.py).
        self.refusals = Refusals(self.store)
        self.catalog = Catalog(policy)
        self.bus = InMemorySubscriptionBus()
        self.host: Any = None  # the host's ServerSession, captured by the middleware
        self.active: dict[str, ServerRequestContext[Any]] = {}  # server -> latest in-flight call (for logs)
        self.listed_generation: dict[str, int] = {}
        self._last_missing: list[str] = []  # servers left out of the last tools/list (see list_tools)
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
        self._refresh_lock = {name: anyio.Lock() for name in self.downstreams}
        self.passthrough = Passthrough(policy, self.downstreams)
        self.handoff = HandOff(home.read_key(), home.db_path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server: Server[Any] = Server(
                "gatekeeper",
                version=__version__,
                instructions=(
                    "Gatekeeper guards writes: tools marked [Gatekeeper] only propose a file, which a person "
                    "approves or rejects on the review page. Use gatekeeper_proposal_status to follow one."
                ),
                lifespan=self._lifespan,
                on_list_tools=self.list_tools,
                on_call_tool=self.call_tool,
                on_subscriptions_listen=ListenHandler(self.bus),
                on_list_resources=self.passthrough.list_resources,
                on_list_resource_templates=self.passthrough.list_resource_templates,
                on_read_resource=self.passthrough.read_resource,
                on_list_prompts=self.passthrough.list_prompts,
                on_get_prompt=self.passthrough.get_prompt,
            )
        self.server.middleware.append(self._middleware)

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options(
            NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True)
        )

    # -- plumbing ------------------------------------------------------------------------------

    async def _db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Store calls block on fsync: run them off the event loop."""
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))

    async def event(self, kind: str, payload: dict[str, Any], proposal_id: str | None = None) -> None:
        try:
            await self._db(self.store.append_event, kind, self.actor, payload, proposal_id)
        except Exception:
            log.exception("could not record %s event", kind)

    async def refused(self, kind: str, payload: dict[str, Any]) -> None:
        """Record a refusal the host provoked: bounded, and counted if an identical one is open."""
        try:
            await self._db(self.refusals.record, kind, self.actor, payload)
        except Exception:
            log.exception("could not record %s event", kind)

    async def _flush_refusals(self) -> None:
        """Write the counters whose window has passed, about once a second."""
        while True:
            await anyio.sleep(_FLUSH_EVERY)
            try:
                await self._db(self.refusals.flush_due)
            except Exception:  # a locked database now is no reason to stop counting
                log.exception("could not flush refusal counters; will retry")

    async def flush_refusals(self) -> None:
        """Write every open counter now: at shutdown, so a clean stop loses no count. The caller
        bounds the time; each counter is its own transaction, so one cut short is simply not there."""
        try:
            await anyio.to_thread.run_sync(self.refusals.flush_all, abandon_on_cancel=True)
        except Exception:
            log.exception("could not flush refusal counters")

    async def _last_flush(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.flush_refusals()

    @asynccontextmanager
    async def _lifespan(self, _server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with anyio.create_task_group() as tg:
            for downstream in self.downstreams.values():
                tg.start_soon(downstream.supervise)
            tg.start_soon(self._flush_refusals)
            await self.event(
                ev.PROXY_STARTED,
                {"servers": sorted(self.downstreams), "policy_digest": self.policy.digest, "version": __version__},
            )
            try:
                yield {}
            finally:
                async with anyio.create_task_group() as ending:
                    ending.start_soon(self._last_flush)  # alongside the children's ending, not after it
                    for downstream in self.downstreams.values():
                        await downstream.close()
                tg.cancel_scope.cancel()
        self.store.close()

    async def _middleware(self, ctx: ServerRequestContext[Any], call_next: Callable[..., Awaitable[Any]]) -> Any:
        """Remember the host session; turn an unexpected exception into a plain error, logged in full."""
        self.host = ctx.session
        try:
            return await call_next(ctx)
        except MCPError:
            raise
        except ValidationError as exc:  # the host sent params of the wrong shape
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors())
            raise MCPError(types.INVALID_PARAMS, f"invalid params for {ctx.method}: {problems}") from None
        except Exception as exc:
            log.error("%s failed", ctx.method, exc_info=exc)
            raise MCPError(
                types.INTERNAL_ERROR, f"Gatekeeper internal error in {ctx.method}; details are in its log"
            ) from None

    async def wire_refused(self, payload: dict[str, Any]) -> None:
        """A host message refused before the SDK saw it (proxy/wire.py has answered it already)."""
        await self.refused(ev.REQUEST_REFUSED, payload)

    def line_limit(self) -> int:
        """The largest message accepted from the host, big enough for any proposal the policy allows."""
        sizes = [
            rule.propose.max_bytes
            for server in self.policy.servers.values()
            for rule in server.tools.values()
            if rule.propose is not None
        ]
        return wire.line_limit(sizes)

    async def _on_child_event(self, kind: str, payload: dict[str, Any]) -> None:
        log.info("%s %s", kind, payload.get("server"))
        await self.event(kind, payload)

    async def _on_child_log(self, downstream: Downstream, params: types.LoggingMessageNotificationParams) -> None:
        ctx = self.active.get(downstream.name)
        session = ctx.session if ctx else self.host
        if session is None:
            return
        try:
            await session.send_log_message(
                params.level, params.data, params.logger, related_request_id=ctx.request_id if ctx else None
            )
        except Exception:  # the host may be gone; a log line is not worth failing for
            log.debug("could not forward a log message from %s", downstream.name, exc_info=True)

    async def _on_child_message(self, downstream: Downstream, message: Any) -> None:
        if isinstance(message, Exception):
            log.warning("%s: transport problem: %s", downstream.name, message)
            return
        try:
            if isinstance(message, types.ToolListChangedNotification):
                await self._refresh(downstream)
                await self._notify_host("tools")
            elif isinstance(message, types.ResourceListChangedNotification):
                await self._notify_host("resources")
            elif isinstance(message, types.PromptListChangedNotification):
                await self._notify_host("prompts")
        except Exception:
            log.warning("could not handle %s from %s", type(message).__name__, downstream.name, exc_info=True)

    async def _notify_host(self, what: str) -> None:
        """2026 hosts hear it on their listen stream; 2025 hosts get the plain notification."""
        await self.bus.publish(
            {"tools": ToolsListChanged, "resources": ResourcesListChanged, "prompts": PromptsListChanged}[what]()
        )
        host = self.host
        if host is not None and host.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            send = {
                "tools": host.send_tool_list_changed,
                "resources": host.send_resource_list_changed,
                "prompts": host.send_prompt_list_changed,
            }[what]
            await send()

    # -- tools -----------------------------------------------------------------------------------

    async def _refresh(self, downstream: Downstream) -> None:
        """List a server's tools and check each exposed one against its pinned definition."""
        async with self._refresh_lock[downstream.name]:
            generation = downstream.generation
            tools: dict[str, types.Tool] = {}
            cursor = None
            while True:
                page = await downstream.call(lambda c, cur=cursor: c.list_tools(cursor=cur))
                tools.update({t.name: t for t in page.tools})
                if (cursor := page.next_cursor) is None:
                    break
            self.catalog.listed[downstream.name] = tools
            definitions = {name: definition(tool) for name, tool in self.catalog.exposed_of(downstream.name).items()}
            self.catalog.pinned_ok[downstream.name] = await self._db(
                self.store.observe_tools, downstream.name, definitions, self.actor
            )
            self.listed_generation[downstream.name] = generation

    async def _ensure(self, downstream: Downstream) -> None:
        await downstream.ready()
        if self.listed_generation.get(downstream.name) != downstream.generation:
            await self._refresh(downstream)

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """Every healthy server's tools. A broken server is logged and recorded, not fatal: its tools
        answer with why it is not available. Only when no server works is the listing an error."""
        problems: dict[str, str] = {}

        async def one(downstream: Downstream) -> None:
            try:
                await self._ensure(downstream)
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
        return types.ListToolsResult(tools=[t for t in self.catalog.host_tools() if self._server_of(t) not in problems])

    def _server_of(self, tool: types.Tool) -> str | None:
        route = self.catalog.route(tool.name)
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
        await self.event(
            ev.TOOLS_LISTED_WITHOUT,
            {"servers": missing, "why": {name: problems[name].split("\n", 1)[0][:500] for name in missing}},
        )

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        arguments = (ctx.params or {}).get("arguments")  # the parsed wire object: no coercion
        try:
            return await self._call_tool(ctx, params.name, arguments)
        except MCPError:
            raise
        except Exception:
            log.exception("tools/call %s failed", cut(params.name))
            return tool_error(f"Gatekeeper hit an internal error handling {params.name!r}; details are in its log.")

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], name: str, arguments: Any
    ) -> types.CallToolResult | types.InputRequiredResult:
        if name == RESERVED_TOOL:
            return await proposal_status(self.home.db_path, arguments)
        route = self.catalog.route(name)
        if route is None:
            await self.refused(ev.TOOL_DENIED, {"tool": name, "why": "not allowed or proposed by the policy"})
            return tool_error(
                f"Tool {cut(name)!r} is not available through Gatekeeper: the policy does not allow it. "
                "Use one of the listed tools, or ask the person running Gatekeeper to add it to policy.yaml."
            )
        downstream = self.downstreams[route.server]
        try:
            await self._ensure(downstream)
        except (DownstreamUnavailable, DownstreamGone) as exc:
            return tool_error(str(exc))
        state = self.catalog.state(route)
        if state == "withheld":
            await self.refused(ev.TOOL_DENIED, {"tool": name, "server": route.server, "why": "definition changed"})
            return tool_error(
                f"Tool {name!r} is withheld: its definition changed since it was approved. A person must review "
                "the change and run `gatekeeper policy check --accept-changes`."
            )
        if state == "unlisted":
            return tool_error(f"Downstream server {route.server!r} does not offer a tool named {route.tool!r}.")
        if route.rule.action == "propose":
            return await self._propose(ctx, route, name, arguments)
        return await self._forward(ctx, downstream, route, arguments)

    async def _forward(
        self, ctx: ServerRequestContext[Any], downstream: Downstream, route: Route, arguments: Any
    ) -> types.CallToolResult:
        meta = {k: v for k, v in (ctx.meta or {}).items() if not k.startswith(_HOST_META) and k != "progress_token"}

        async def progress(value: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(value, total, message)

        self.active[route.server] = ctx
        try:
            result = await downstream.call(
                lambda c: c.session.call_tool(route.tool, arguments, meta=meta or None, progress_callback=progress)
            )
        except DownstreamGone as exc:
            return tool_error(f"{exc}. It will be restarted on the next call.")
        except DownstreamUnavailable as exc:
            return tool_error(str(exc))
        finally:
            if self.active.get(route.server) is ctx:
                del self.active[route.server]
        return strip_stamp(result)

    async def _propose(
        self, ctx: ServerRequestContext[Any], route: Route, host_name: str, arguments: Any
    ) -> types.CallToolResult | types.InputRequiredResult:
        assert route.rule.propose is not None
        state = (ctx.params or {}).get("requestState")
        if state is not None:
            return await self._resume(ctx, state)
        info = ctx.session.client_params.client_info if ctx.session.client_params else None
        requester = intake.Requester(
            client_name=info.name if info else None,
            client_version=info.version if info else None,
            protocol_version=ctx.protocol_version,
            session_id=self.session_id,
        )
        server = self.policy.servers[route.server]
        try:
            draft = intake.draft(
                route.server, server, route.tool, route.rule.propose, arguments, requester, self.policy.digest
            )
        except InvalidInput as exc:
            await self.refused(
                ev.PROPOSAL_REFUSED,
                {
                    "server": route.server,
                    "tool": route.tool,
                    "why": str(exc),
                    "args_sha256": intake.arguments_digest(arguments),
                },
            )
            return tool_error(f"Not proposed: {exc}")
        proposed = await self._db(self.store.propose, draft, self.actor)
        pending = self._pending_result(
            proposed.id,
            draft.path,
            f"{server.workspace}/{draft.path}",
            proposed.size,
            proposed.sha256,
            proposed.expires_at,
            repeat=not proposed.created,
        )
        wait = route.rule.propose.wait_seconds
        if wait > 0:
            outcome = await wait_for_outcome(self.home.db_path, proposed.id, wait, self._progress(ctx, wait))
            return final_result(outcome) if outcome is not None else pending
        if self.handoff.available(ctx):
            return self.handoff.request(proposed.id, self.review_url(proposed.id))
        return pending

    def _pending_result(
        self, pid: str, path: str, absolute: str, size: int, sha256: str, expires_at: str, *, repeat: bool
    ) -> types.CallToolResult:
        url = self.review_url(pid)
        summary = {
            "proposal_id": pid,
            "status": "pending_approval",
            "destination": path,
            "absolute_path": absolute,
            "size": size,
            "sha256": sha256,
            "expires_at": expires_at,
            "review_url": url,
            "repeat": repeat,
        }
        text = (
            f"Proposed, not written: {path} ({size} bytes, sha256 {sha256[:16]}…). "
            f"Status: pending_approval. A person must approve this exact content at {url} before the file is "
            f"created. Proposal id: {pid} (check it with {RESERVED_TOOL})."
        )
        if repeat:
            text = "This identical proposal is already pending. " + text
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=summary)

    def review_url(self, pid: str) -> str:
        return f"{self.policy.review_url}/proposals/{pid}"

    def _progress(self, ctx: ServerRequestContext[Any], total: float) -> Callable[[float], Awaitable[None]]:
        async def tick(elapsed: float) -> None:
            await ctx.session.report_progress(
                round(elapsed, 1), float(total), "waiting for a person to review the proposal"
            )

        return tick

    async def _resume(self, ctx: ServerRequestContext[Any], state: Any) -> types.CallToolResult:
        """The host retried after the hand-off (see proxy/handoff.py)."""
        pid = self.handoff.proposal_of(state)
        if pid is None:
            await self.refused(ev.PROPOSAL_REFUSED, {"why": "request_state forged, altered or expired"})
            return tool_error(
                "Not proposed: the request state is not one Gatekeeper issued (or it expired). Call again."
            )
        await self.event(ev.HANDOFF_RESUMED, bounded({"answer": self.handoff.answer(ctx)}), proposal_id=pid)
        outcome = await self.handoff.outcome(pid)
        if outcome is not None:
            return final_result(outcome)
        detail = await read_proposal(self.home.db_path, pid)
        if detail is None:
            return tool_error(f"No proposal {pid}.")
        return self._pending_result(
            pid,
            detail["path"],
            f"{detail['workspace']}/{detail['path']}",
            detail["size"],
            detail["sha256"],
            detail["expires_at"],
            repeat=False,
        )

"""Our child client (proxy/childrpc.py, negotiate.py) behind the face of the SDK's ``Client``.

``GATEKEEPER_PROXY=lean`` (read by proxy/downstream.py) puts this in place of ``mcp.Client``
toward stdio children: the lines, ids, handshake, cancellation and the child's own requests are
ours, with no SDK dispatcher, no per-line pydantic parse and no output-schema validation of each
result (the host validates; issue 12). Until the callers (listing, passthrough, completion, the
SDK-path call) work on dicts, results are handed to them as the SDK's result models, built the
way the SDK client builds them (the later revision's fields dropped for a handshake-era child);
that bridge, and the SDK imports it needs, go when they do.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.shared.dispatcher import ProgressFnT

from gatekeeper.proxy import mcpwire as w
from gatekeeper.proxy.child import ChildPipe, ChildProcess
from gatekeeper.proxy.childrpc import ChildSession, RpcError, serving
from gatekeeper.proxy.negotiate import Negotiated, negotiate
from gatekeeper.proxy.rpclines import Json

log = logging.getLogger("gatekeeper.proxy")
OnMessage = Callable[[Any], Awaitable[None]]
OnLog = Callable[[types.LoggingMessageNotificationParams], Awaitable[None]]


class LeanSession:
    """The part of the SDK's ``ClientSession`` the proxy calls (``call_tool``, ``complete``), and the
    stamp proxy/eras.py takes for raw forwarding (its ``_stamp(data, opts)`` shape)."""

    def __init__(self, rpc: ChildSession, negotiated: Negotiated) -> None:
        self.rpc, self.negotiated = rpc, negotiated

    def _stamp(self, data: Json, opts: Any = None) -> None:
        self.negotiated.stamp(data)

    async def send(self, method: str, params: Json | None, progress: ProgressFnT | None = None) -> Json:
        """One request; the child's error as the SDK's ``MCPError`` (callers catch that), the
        later revision's fields dropped for a handshake-era child as the SDK client drops them."""
        try:
            raw = await self.rpc.request(method, params, on_progress=progress)
        except RpcError as exc:
            raise MCPError(exc.code, exc.message, exc.data) from None
        foreign = w.later_revision_fields(method, self.negotiated.protocol_version)
        return {k: v for k, v in raw.items() if k not in foreign} if foreign else raw

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: ProgressFnT | None = None,
        *,
        meta: Any = None,
    ) -> types.CallToolResult:
        params: Json = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        if meta:
            params["_meta"] = dict(meta)
        raw = await self.send("tools/call", params, progress_callback)
        if raw.get("resultType") == "input_required":  # the SDK client's refusal, in its words
            raise RuntimeError(
                "Server returned InputRequiredResult; pass allow_input_required=True to receive it "
                "and retry call_tool(..., input_responses=..., request_state=result.request_state)."
            )
        return types.CallToolResult.model_validate(raw, by_name=False)

    async def complete(
        self,
        ref: types.ResourceTemplateReference | types.PromptReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None = None,
    ) -> types.CompleteResult:
        params: Json = {"ref": ref.model_dump(mode="json", by_alias=True, exclude_none=True), "argument": argument}
        if context_arguments is not None:
            params["context"] = {"arguments": context_arguments}
        return types.CompleteResult.model_validate(await self.send("completion/complete", params), by_name=False)


class LeanClient:
    """What proxy/downstream.py and its callers use of ``mcp.Client``, over our own session."""

    def __init__(self, rpc: ChildSession, negotiated: Negotiated) -> None:
        self.session = LeanSession(rpc, negotiated)
        self.protocol_version = negotiated.protocol_version
        self.server_capabilities = types.ServerCapabilities.model_validate(negotiated.server_capabilities)
        info = negotiated.server_info
        self.server_info = None if info is None else types.Implementation.model_validate(info)

    async def _page(self, method: str, model: type[Any], cursor: str | None) -> Any:
        raw = await self.session.send(method, {"cursor": cursor} if cursor is not None else None)
        return model.model_validate(raw, by_name=False)

    async def list_tools(self, *, cursor: str | None = None) -> types.ListToolsResult:
        result: types.ListToolsResult = await self._page("tools/list", types.ListToolsResult, cursor)
        if self.protocol_version in w.MODERN_PROTOCOL_VERSIONS:  # the SDK client's 2026 MUST, its own check
            from mcp.shared.inbound import find_invalid_x_mcp_header

            result.tools = [t for t in result.tools if find_invalid_x_mcp_header(t.input_schema) is None]
        return result

    async def list_resources(self, *, cursor: str | None = None) -> types.ListResourcesResult:
        result: types.ListResourcesResult = await self._page("resources/list", types.ListResourcesResult, cursor)
        return result

    async def list_resource_templates(self, *, cursor: str | None = None) -> types.ListResourceTemplatesResult:
        method, model = "resources/templates/list", types.ListResourceTemplatesResult
        result: types.ListResourceTemplatesResult = await self._page(method, model, cursor)
        return result

    async def list_prompts(self, *, cursor: str | None = None) -> types.ListPromptsResult:
        result: types.ListPromptsResult = await self._page("prompts/list", types.ListPromptsResult, cursor)
        return result

    async def read_resource(self, uri: Any) -> types.ReadResourceResult:
        raw = await self.session.send("resources/read", {"uri": str(uri)})
        return types.ReadResourceResult.model_validate(raw, by_name=False)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> types.GetPromptResult:
        params: Json = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return types.GetPromptResult.model_validate(await self.session.send("prompts/get", params), by_name=False)

    @asynccontextmanager
    async def listen(self, *, tools_list_changed: bool = False) -> AsyncIterator[None]:
        """A 2026 listen stream held open while the block runs; entered once the child acknowledged it."""
        acked = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def hold() -> None:
                try:
                    await self.session.rpc.listen({"toolsListChanged": tools_list_changed}, acked)
                finally:
                    acked.set()

            tg.start_soon(hold)
            await acked.wait()
            try:
                yield
            finally:
                tg.cancel_scope.cancel()


@asynccontextmanager
async def lean_client(
    child: AbstractAsyncContextManager[ChildProcess],
    mode: str,
    name: str,
    carrier: Any,
    *,
    message_handler: OnMessage,
    logging_callback: OnLog,
    list_roots_callback: Callable[[Any], Awaitable[types.ListRootsResult]],
) -> AsyncIterator[LeanClient]:
    """Start (or adopt) the child (``child``: proxy/child.py's ``child_process``), negotiate in
    ``mode`` and serve it while the block runs; the callbacks are the ones given the SDK's ``Client``."""
    version: list[str] = [w.LATEST_HANDSHAKE_VERSION]

    async def notify(method: str, params: Json) -> None:
        """A child's notification as the SDK's typed model, for Proxy._on_child_message."""
        from mcp_types import methods

        try:
            note = methods.parse_server_notification(method, version[0], params)
        except (KeyError, ValueError):
            log.debug("%s: dropped %s (not a %s notification)", name, method, version[0])
            return
        await message_handler(note)

    async def logged(params: Json) -> None:
        await logging_callback(types.LoggingMessageNotificationParams.model_validate(params, by_name=False))

    async def roots() -> Json:
        dumped: Json = (await list_roots_callback(None)).model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped

    pipe = carrier if isinstance(carrier, ChildPipe) else None
    async with child as process:
        rpc = ChildSession(process.stdin.send, name=name, on_log=logged, on_notify=notify, roots=roots)
        async with serving(rpc, process.stdout, pipe):
            negotiated = await negotiate(rpc, mode)
            version[0] = negotiated.protocol_version
            log.info("%s: our own client toward the child (GATEKEEPER_PROXY=lean), %s", name, version[0])
            yield LeanClient(rpc, negotiated)

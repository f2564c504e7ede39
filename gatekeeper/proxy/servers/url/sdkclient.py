"""The SDK's ``Client`` behind proxy/servers/face.py's dict face: for url servers only.

Streamable HTTP (sessions, SSE, 202s, redirects, the protocol-version header) stays the SDK's
(proxy/servers/url/connection.py), so a url server is still spoken to by its ``Client``, in the same calls as
before; this module only turns what goes in and out into wire dicts and ``RpcError`` so the
callers are the same for every server. Imported only when a policy has a url server (it loads
the SDK).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, cast

import mcp_types as types
from mcp import Client, MCPError

from gatekeeper.proxy.protocol.rpc import Json, RpcError
from gatekeeper.proxy.servers.face import Progress

OnMessage = Callable[[Json | Exception], Awaitable[None]]
OnLog = Callable[[Json], Awaitable[None]]
Roots = Callable[[], Awaitable[Json]]


def _dump(model: Any) -> Json:
    dumped: Json = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


class SdkClient:
    """``ChildClient`` over a live SDK ``Client``: its typed calls, their results dumped."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.protocol_version: str = client.protocol_version
        self.server_capabilities: Json = _dump(client.server_capabilities)
        session_stamp = getattr(getattr(client, "session", None), "_stamp", None)  # the SDK client's envelope
        self.stamp: Callable[[Json], dict[str, str]] | None = None
        if session_stamp is not None:

            def stamped(data: Json) -> dict[str, str]:
                opts: dict[str, Any] = {}
                session_stamp(data, opts)
                return dict(opts.get("headers") or {})

            self.stamp = stamped

    async def request(self, method: str, params: Json | None = None, on_progress: Progress | None = None) -> Json:
        """The typed call for ``method``; the SDK's ``MCPError`` as our ``RpcError`` (same code, message, data)."""
        try:
            return _dump(await self._typed(method, params or {}, on_progress))
        except MCPError as exc:
            raise RpcError(exc.error.code, exc.error.message, exc.error.data) from None

    async def _typed(self, method: str, params: Json, on_progress: Progress | None) -> Any:
        client, session, cursor = self.client, self.client.session, params.get("cursor")
        if method == "tools/call":
            meta = params.get("_meta")
            return await session.call_tool(
                params["name"], params.get("arguments"), progress_callback=cast(Any, on_progress), meta=meta or None
            )
        if method == "completion/complete":
            ref = params["ref"]
            typed = (types.PromptReference if ref.get("type") == "ref/prompt" else types.ResourceTemplateReference)(
                **ref
            )
            context = params.get("context")
            arguments = context.get("arguments") if isinstance(context, dict) else None
            return await session.complete(typed, params["argument"], arguments)
        if method == "resources/read":
            return await client.read_resource(params["uri"])
        if method == "prompts/get":
            return await client.get_prompt(params["name"], params.get("arguments"))
        lists: dict[str, Callable[..., Awaitable[Any]]] = {
            "tools/list": client.list_tools,
            "resources/list": client.list_resources,
            "resources/templates/list": client.list_resource_templates,
            "prompts/list": client.list_prompts,
        }
        return await lists[method](cursor=cursor)

    def listen(self, *, tools_list_changed: bool = False) -> AbstractAsyncContextManager[None]:
        return self._listen(tools_list_changed)

    @asynccontextmanager
    async def _listen(self, tools_list_changed: bool) -> AsyncIterator[None]:
        try:
            async with self.client.listen(tools_list_changed=tools_list_changed):
                yield
        except MCPError as exc:
            raise RpcError(exc.error.code, exc.error.message, exc.error.data) from None


@asynccontextmanager
async def sdk_client(
    transport: Any, mode: str, *, on_message: OnMessage, on_log: OnLog, roots: Roots
) -> AsyncIterator[SdkClient]:
    """The SDK's ``Client`` over ``transport`` (proxy/servers/url/connection.py's ``connect``) in ``mode``, its
    callbacks given dicts: notifications as ``{"method", "params"}`` (a transport problem as the
    exception), log params, a roots answer."""

    async def message(item: Any) -> None:
        if isinstance(item, Exception):
            await on_message(item)
        elif isinstance(method := getattr(item, "method", None), str):
            params = getattr(item, "params", None)
            await on_message({"method": method, "params": {} if params is None else _dump(params)})

    async def logged(params: types.LoggingMessageNotificationParams) -> None:
        await on_log(_dump(params))

    async def listed(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult.model_validate(await roots(), by_name=False)

    calls: dict[str, Any] = {"message_handler": message, "logging_callback": logged, "list_roots_callback": listed}
    async with Client(transport, mode=mode, cache=None, log_level="debug", **calls) as client:
        yield SdkClient(client)

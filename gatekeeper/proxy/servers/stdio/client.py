"""The proxy's client toward a stdio child (proxy/servers/stdio/rpc.py, negotiate.py), as proxy/servers/face.py's face.

Why not the SDK's ``Client``: importing it costs ~1 s and ~40 MiB before the proxy can talk to a
child, and it parses every line into pydantic models and validates every result, which the host
does again anyway (issue 12). Here the lines, ids, handshake, cancellation and the child's own
requests are ours, and results stay the raw dicts the child sent. What the SDK client did to
results is kept: a handshake-era child's result loses the later revision's fields, the top-level
fields its result models default get those defaults (``DEFAULTS``: the host side's per-era shaping
expects a 2026 result's ``resultType`` and cache hints), and a 2026 child's tools with an invalid
``x-mcp-header`` annotation are left out of its listing (the SDK's own check decides, imported
only when a schema carries the annotation at all).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio

from gatekeeper.proxy.protocol import mcp as w
from gatekeeper.proxy.protocol.rpc import Json
from gatekeeper.proxy.servers.face import Progress
from gatekeeper.proxy.servers.stdio.handshake import Negotiated, negotiate
from gatekeeper.proxy.servers.stdio.process import ChildPipe, ChildProcess
from gatekeeper.proxy.servers.stdio.rpc import ChildSession, serving

log = logging.getLogger("gatekeeper.proxy")
OnMessage = Callable[[Json], Awaitable[None]]
OnLog = Callable[[Json], Awaitable[None]]
Roots = Callable[[], Awaitable[Json]]
X_MCP_HEADER = "x-mcp-header"
_COMPLETE: Json = {"resultType": "complete"}
_CACHEABLE: Json = {"ttlMs": 0, "cacheScope": "private", **_COMPLETE}
DEFAULTS: dict[str, Json] = {
    "tools/call": {"isError": False, **_COMPLETE},
    "resources/read": _CACHEABLE,
    "prompts/get": _COMPLETE,
    "completion/complete": _COMPLETE,
    "tools/list": _CACHEABLE,
    "resources/list": _CACHEABLE,
    "resources/templates/list": _CACHEABLE,
    "prompts/list": _CACHEABLE,
}
"""Per method, the top-level fields the SDK's (version-free) result model fills in when absent."""
INPUT_REQUIRED = (  # the SDK client's refusal of a call that asks for input, in its words
    "Server returned InputRequiredResult; pass allow_input_required=True to receive it "
    "and retry call_tool(..., input_responses=..., request_state=result.request_state)."
)


class StdioClient:
    """One life of a stdio child's connection, after its handshake (``ChildClient``)."""

    def __init__(self, rpc: ChildSession, negotiated: Negotiated) -> None:
        self.rpc, self.negotiated = rpc, negotiated
        self.protocol_version = negotiated.protocol_version
        self.server_capabilities: Json = dict(negotiated.server_capabilities)
        self.server_info = negotiated.server_info

    def stamp(self, data: Json) -> dict[str, str]:
        """A 2026 child's envelope on a raw request (a pipe sends no headers)."""
        self.negotiated.stamp(data)
        return {}

    async def request(self, method: str, params: Json | None = None, on_progress: Progress | None = None) -> Json:
        raw = await self.rpc.request(method, params, on_progress=on_progress)
        foreign = w.later_revision_fields(method, self.protocol_version)
        if foreign:
            raw = {k: v for k, v in raw.items() if k not in foreign}
        if method == "tools/call" and raw.get("resultType") == "input_required":
            raise RuntimeError(INPUT_REQUIRED)
        for key, value in DEFAULTS.get(method, {}).items():
            raw.setdefault(key, value)
        if method == "tools/list" and self.negotiated.modern and isinstance(tools := raw.get("tools"), list):
            raw["tools"] = [t for t in tools if not _bad_header(t)]
        return raw

    @asynccontextmanager
    async def listen(self, *, tools_list_changed: bool = False) -> AsyncIterator[None]:
        acked = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def hold() -> None:
                try:
                    await self.rpc.listen({"toolsListChanged": tools_list_changed}, acked)
                finally:
                    acked.set()

            tg.start_soon(hold)
            await acked.wait()
            try:
                yield
            finally:
                tg.cancel_scope.cancel()


def _bad_header(tool: Any) -> bool:
    """The SDK client's 2026 MUST: a tool whose ``x-mcp-header`` annotations are invalid is dropped."""
    schema = tool.get("inputSchema") if isinstance(tool, dict) else None
    if not _mentions(schema, X_MCP_HEADER):
        return False
    from mcp.shared.inbound import find_invalid_x_mcp_header

    return find_invalid_x_mcp_header(schema) is not None


def _mentions(value: Any, key: str) -> bool:
    """``key`` is a key of some object inside ``value``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if key in item:
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


@asynccontextmanager
async def connect_child(
    child: AbstractAsyncContextManager[ChildProcess],
    mode: str,
    name: str,
    carrier: Any,
    *,
    on_message: OnMessage,
    on_log: OnLog,
    roots: Roots,
) -> AsyncIterator[StdioClient]:
    """Start (or adopt) the child (``child``: proxy/servers/stdio/process.py's ``child_process``), negotiate in
    ``mode`` and serve it while the block runs. ``on_message`` hears the child's notifications
    (``{"method", "params"}``) other than logs (``on_log``, their params) and progress."""

    async def notify(method: str, params: Json) -> None:
        await on_message({"method": method, "params": params})

    pipe = carrier if isinstance(carrier, ChildPipe) else None
    async with child as process:
        rpc = ChildSession(process.stdin.send, name=name, on_log=on_log, on_notify=notify, roots=roots)
        async with serving(rpc, process.stdout, pipe):
            negotiated = await negotiate(rpc, mode)
            log.info("%s: our own client toward the child, %s", name, negotiated.protocol_version)
            yield StdioClient(rpc, negotiated)

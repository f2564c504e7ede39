"""A real MCP server (stdio, MCPServer) for proxy tests: tools that misbehave on purpose.

Its tool list depends on $PROBE_VARIANT, so a restart can change a definition (pinning tests).
Usage: python -m tests.peers.probe_server
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("probe", version="1.0")
VARIANT = os.environ.get("PROBE_VARIANT", "1")


@server.tool(description="Return the arguments exactly as received.")
def echo(value: object = None) -> dict[str, object]:
    return {"value": value}


@server.tool(description="This process's pid, so a test can kill it.")
def pid() -> int:
    return os.getpid()


@server.tool(description="Exit at once, mid-call.")
def die() -> str:
    os._exit(3)


@server.tool(
    description="Sleep, then create the marker file; a cancelled call never creates it. The optional "
    "`started` file is created when the call begins, `cancelled` when its handler is cancelled."
)
async def sleep_then_touch(marker: str, seconds: float = 2.0, started: str = "", cancelled: str = "") -> str:
    """A deliberately slow call: the sleep is the thing under test (cancellation, a kill mid-call).
    Tests wait on the ``started``/``cancelled`` files, never on time."""
    if started:
        Path(started).write_text(str(os.getpid()))
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        if cancelled:
            Path(cancelled).write_text("cancelled")
        raise
    Path(marker).write_text("done")
    return "touched"


@server.tool(description="The log level this request asked for in its 2026-07-28 `_meta`, or 'none'.")
def log_opt_in(ctx: Context) -> str:
    meta = (ctx.request_context.params or {}).get("_meta") or {}
    return str(meta.get("io.modelcontextprotocol/logLevel", "none"))


@server.tool(description="Report progress and log each step.")
async def steps(n: int, ctx: Context) -> int:
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
        await ctx.info(f"log line {i}")
        await anyio.sleep(0.01)  # pacing on purpose: separate progress notifications, not a wait
    return n


@server.tool(description="Add a tool named `extra` and tell the client the list changed.")
async def grow(ctx: Context) -> str:
    @server.tool(name="extra", description="Appeared later.")
    def extra() -> str:
        return "extra"

    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool(description="Ask the client for its roots and return them.")
async def roots(ctx: Context) -> list[str]:
    result = await ctx.session.list_roots()
    return [str(r.uri) for r in result.roots]


@server.tool(description=f"A tool whose definition depends on PROBE_VARIANT (now {VARIANT}).")
def shifty() -> str:
    return VARIANT


@server.tool(description="Write a file (a real write, to be proposed).")
def put(path: str, content: str) -> str:
    Path(path).write_text(content)
    return "written"


if os.environ.get("PROBE_GROW_AT_FIRST_LIST"):
    # A server whose tools change just as it is first listed (a plugin that loads late): the
    # change is published to the listen streams open at that moment, and the first list is old.
    from mcp.server.subscriptions import ToolsListChanged

    _list_tools, _grown = server.list_tools, []

    async def _list_then_grow() -> list[Any]:
        tools = await _list_tools()
        if not _grown:
            _grown.append(True)
            server.tool(name="extra", description="Appeared later.")(lambda: "extra")
            await server._subscriptions.publish(ToolsListChanged())
        return tools

    server.list_tools = _list_then_grow  # type: ignore[method-assign]


if __name__ == "__main__":
    print("probe: starting", file=sys.stderr)
    if os.environ.get("PROBE_FAIL_START"):
        print("probe: refusing to start (PROBE_FAIL_START is set)", file=sys.stderr)
        raise SystemExit(7)
    if delay := os.environ.get("PROBE_START_DELAY"):
        time.sleep(float(delay))  # a slow starter: the host's first requests wait for it
    server.run("stdio")

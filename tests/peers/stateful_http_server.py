"""A stateful MCP server on the Python SDK's streamable-http transport (``Mcp-Session-Id``).

For tests of Gatekeeper's ``url`` servers: ``read_note`` reads, ``create_note`` really writes
(behind Gatekeeper it must become a proposal and never run), ``erase_all`` writes too (denied),
``whoami`` says which process answered, ``steps`` reports progress and logs, ``grow`` adds a
tool and says the list changed; a resource ``note://hello`` and a prompt ``summarize``.
With ``--token-env NAME`` every request must carry
``Authorization: Bearer $NAME`` (401 otherwise), so a test can prove the header reached it.
``--record DIR`` appends each HTTP exchange (request and answer, as sent) to a file in DIR: the
server answers at ``/mcp`` and also at ``/TAG/mcp``, and an exchange at ``/TAG/mcp`` goes to
``DIR/TAG.jsonl`` (else ``DIR/record.jsonl``), so tests that share one server each see their own
exchanges. ``--json`` answers with plain JSON instead of SSE streams.
Usage: ``python -m tests.peers.stateful_http_server PORT NOTES_DIR [--token-env NAME] [--stateless]``. It
prints ``listening on PORT`` once the socket accepts connections.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer


def build(root: Path) -> MCPServer:
    server = MCPServer("stateful-notes", version="1.0")

    @server.tool(description="Read one note by its name, e.g. hello.md.")
    def read_note(name: str) -> str:
        return (root / Path(name).name).read_text(encoding="utf-8")

    @server.tool(description="Create a note (fails if it exists).")
    def create_note(name: str, body: str) -> str:
        with open(root / Path(name).name, "x", encoding="utf-8") as f:
            f.write(body)
        return f"created {name}"

    @server.tool(description="Erase every note (behind Gatekeeper: denied).")
    def erase_all() -> str:
        (root / "ERASED").write_text("yes")
        return "erased"

    @server.tool(description="Report progress and log each step.")
    async def steps(n: int, ctx: Context) -> int:
        for i in range(1, n + 1):
            await ctx.report_progress(i, n, f"step {i}")
            await ctx.info(f"log line {i}")
        return n

    @server.tool(description="Add a tool named `extra` and tell the client the list changed.")
    async def grow(ctx: Context) -> str:
        @server.tool(name="extra", description="Appeared later.")
        def extra() -> str:
            return "extra"

        await ctx.notify_tools_changed()
        await ctx.session.send_tool_list_changed()
        return "grown"

    @server.tool(description="Sleep (the thing under test: cancellation); files say started / cancelled.")
    async def wait(seconds: float, started: str, cancelled: str) -> str:
        Path(started).write_text("started")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            Path(cancelled).write_text("cancelled")
            raise
        return "waited"

    @server.resource("note://hello", description="The note hello.md.", mime_type="text/markdown")
    def hello() -> str:
        return (root / "hello.md").read_text(encoding="utf-8")

    @server.prompt(description="Ask for a summary of one note.")
    def summarize(name: str) -> str:
        return f"Summarize the note {name}."

    @server.tool(description="The process id of the server that answered.")
    def whoami() -> int:
        return os.getpid()

    return server


def with_token(app: Any, token: str) -> Any:
    """A plain ASGI wrapper: 401 unless the request carries the expected bearer token."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"missing or wrong token"})
            return
        await app(scope, receive, send)

    return guarded


def recording(app: Any, folder: Path) -> Any:
    """A plain ASGI wrapper: each HTTP exchange, once it ends, as one JSON line (method, headers,
    request body, status, response body) in its tag's file in ``folder``, so a test sees exactly what
    reached the server for it; ``/TAG/mcp`` is served as ``/mcp``."""

    async def recorder(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        tag = "record"
        parts = scope["path"].split("/")  # "/TAG/mcp" -> ["", "TAG", "mcp"]
        if len(parts) == 3 and parts[2] == "mcp" and parts[1].isidentifier():
            tag, scope = parts[1], {**scope, "path": "/mcp", "raw_path": b"/mcp"}
        path = folder / f"{tag}.jsonl"
        body, chunks, status = bytearray(), bytearray(), [0]

        async def received() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
            return message

        async def sent(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body":
                chunks.extend(message.get("body", b""))
            await send(message)

        try:
            await app(scope, received, sent)
        finally:
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            record = {"method": scope["method"], "headers": headers, "body": body.decode(), "status": status[0]}
            record["response"] = chunks.decode()
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    return recorder


async def serve(
    port: int, root: Path, token_env: str | None, stateless: bool, record: Path | None = None, json_out: bool = False
) -> None:
    app: Any = build(root).streamable_http_app(stateless_http=stateless, json_response=json_out)
    if token_env:
        app = with_token(app, os.environ[token_env])
    if record is not None:
        app = recording(app, record)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        while not server.started:
            await anyio.sleep(0.01)  # uvicorn offers no start event; this is the readiness poll
        print(f"listening on {port}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("root", type=Path)
    parser.add_argument("--token-env")
    parser.add_argument("--stateless", action="store_true", help="no sessions: a fresh server per request")
    parser.add_argument("--record", type=Path, help="append every HTTP exchange to a file in this folder (JSON lines)")
    parser.add_argument("--json", action="store_true", help="plain JSON answers instead of SSE streams")
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    if args.record is not None:
        args.record.mkdir(parents=True, exist_ok=True)
    anyio.run(serve, args.port, args.root, args.token_env, args.stateless, args.record, args.json)
    sys.exit(0)


if __name__ == "__main__":
    main()

"""An HTTP "MCP server" that handshakes properly and then answers every tools/call badly.

Modes (``python -m tests.peers.hostile_http PORT MODE``): ``html`` (200 text/html), ``slow``
(never answers), ``huge`` (a JSON body over 10 MB), ``sse`` (an event stream of pings that never
carries the answer), ``redirect`` (307 to another host), ``500`` (an HTML error page). The
handshake (``initialize``; ``server/discover`` is unknown to it, as to a 2025 server) and
``tools/list`` are answered correctly, so the failure lands on a call. stdlib asyncio only.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

TOOL = {"name": "poke", "description": "Answers badly.", "inputSchema": {"type": "object"}}


def _json(status: str, payload: Any) -> bytes:
    body = json.dumps(payload).encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def _plain(status: str, kind: str, body: bytes, extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


async def _read(reader: asyncio.StreamReader) -> tuple[str, dict[str, Any] | None]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    method = head[0].split(" ")[0]
    length = next((int(h.split(":", 1)[1]) for h in head[1:] if h.lower().startswith("content-length:")), 0)
    body = await reader.readexactly(length) if length else b""
    return method, (json.loads(body) if body else None)


async def _call(mode: str, port: int, rid: Any, writer: asyncio.StreamWriter) -> None:
    if mode == "html":
        writer.write(_plain("200 OK", "text/html", b"<html><body>Please log in</body></html>"))
    elif mode == "500":
        writer.write(_plain("500 Internal Server Error", "text/html", b"<h1>Internal Server Error</h1>"))
    elif mode == "redirect":
        writer.write(_plain("307 Temporary Redirect", "text/plain", b"", f"Location: http://127.0.0.2:{port}/mcp\r\n"))
    elif mode == "huge":
        text = "x" * (11 * 1024 * 1024)
        writer.write(
            _json("200 OK", {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
        )
    elif mode == "sse":
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n\r\n")
        while True:
            writer.write(b": ping\n\n")
            await writer.drain()
            await asyncio.sleep(0.1)
    elif mode == "slow":
        await asyncio.Event().wait()
    await writer.drain()


async def _answer(mode: str, port: int, method: str, message: dict[str, Any] | None, w: asyncio.StreamWriter) -> None:
    if method != "POST" or message is None:
        w.write(_plain("405 Method Not Allowed", "text/plain", b""))
    elif "id" not in message:
        w.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
    elif message["method"] == "initialize":
        result = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
        w.write(_json("200 OK", {"jsonrpc": "2.0", "id": message["id"], "result": result}))
    elif message["method"] == "tools/list":
        w.write(_json("200 OK", {"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [TOOL]}}))
    elif message["method"] == "tools/call":
        await _call(mode, port, message["id"], w)
    else:
        error = {"code": -32601, "message": f"method not found: {message['method']}"}
        w.write(_json("200 OK", {"jsonrpc": "2.0", "id": message["id"], "error": error}))
    await w.drain()


def handler(mode: str, port: int) -> Any:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                method, message = await _read(reader)
                await _answer(mode, port, method, message, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return handle


async def main(port: int, mode: str) -> None:
    server = await asyncio.start_server(handler(mode, port), "127.0.0.1", port)
    print(f"listening on {port} ({mode})", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))

"""A hostile MCP server on stdio: it answers the handshake, then floods a line that never ends.

Tools: ``flood`` writes ``FLOOD_BYTES`` (default 50 MiB) of one answer's line and no newline, then
waits, its pipe open, until its stdin closes; ``echo`` answers at once; ``pid`` says which process answered (a restart
shows as a new pid). No SDK: bytes chosen by the test, as an attacker would.
"""

from __future__ import annotations

import json
import os
import sys

CHUNK = 1024 * 1024


def answer(rid: object, result: dict[str, object]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
    sys.stdout.flush()


def text(rid: object, words: str) -> None:
    answer(rid, {"content": [{"type": "text", "text": words}], "isError": False})


def flood(rid: object) -> None:
    total = int(os.environ.get("FLOOD_BYTES", str(50 * CHUNK)))
    head = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": ""}]}})
    os.write(1, head[: head.index('"text": "') + 9].encode())
    block = b"A" * CHUNK
    try:
        for _ in range(total // CHUNK):
            os.write(1, block)
    except BrokenPipeError:
        pass  # the proxy stopped reading: as it should
    sys.stdin.buffer.read()  # no newline, ever; until the proxy closes our stdin (or dies)
    sys.exit(0)


def main() -> None:
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method, rid = message.get("method"), message.get("id")
        if rid is None:
            continue
        if method == "initialize":
            info = {"name": "flooding", "version": "1"}
            answer(rid, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": info})
        elif method == "tools/list":
            answer(rid, {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("flood", "echo", "pid")]})
        elif method == "tools/call":
            tool = (message.get("params") or {}).get("name")
            if tool == "flood":
                flood(rid)
            else:
                text(rid, str(os.getpid()) if tool == "pid" else "echo")
        else:
            error = {"code": -32601, "message": "Method not found"}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

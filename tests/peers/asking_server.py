"""A real stdio MCP server written without the SDK that asks its client things and logs the answers.

Every line it receives is appended to ``$ASK_LOG``. Before the handshake it prints junk on stdout
(not JSON, not JSON-RPC). Its one tool ``hello``, called once the client has settled its era,
first sends the requests a server may send a client: ``ping``, ``roots/list``,
``sampling/createMessage`` (valid and malformed), ``elicitation/create`` and an unknown method,
so a test compares what two clients answer. Then it answers a fixed text.
``ASK_REFUSE=discover``: the first ``server/discover`` gets -32022 naming 2026-07-28;
``ASK_REFUSE=initialize``: discover is not found and the first ``initialize`` gets -32022
(as from a slow starter that a timed-out probe locked modern).
"""

from __future__ import annotations

import json
import os
import sys

ASKS: list[dict[str, object]] = [
    {"id": "p", "method": "ping"},
    {"id": 0, "method": "roots/list"},
    {"id": 2, "method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}},
    {"id": 3, "method": "sampling/createMessage", "params": {"maxTokens": "many"}},
    {
        "id": 4,
        "method": "elicitation/create",
        "params": {"message": "?", "requestedSchema": {"type": "object", "properties": {}}},
    },
    {"id": 5, "method": "no/such"},
]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def ask() -> None:
    for message in ASKS:
        send(message)


def main() -> None:
    log = open(os.environ["ASK_LOG"], "a")  # noqa: SIM115 - open for the process's life
    sys.stdout.write("junk before the protocol\n[1, 2]\n" + '{"jsonrpc": "1.0", "id": 1}\n')
    sys.stdout.flush()
    refused = False
    for line in sys.stdin:
        log.write(line)
        log.flush()
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if method == "initialize" and os.environ.get("ASK_REFUSE") == "initialize" and not refused:
            refused = True  # a slow starter the probe locked modern after all: initialize is refused
            data = {"supported": ["2026-07-28"], "requested": "2025-11-25"}
            send({"id": rid, "error": {"code": -32022, "message": "Unsupported protocol version", "data": data}})
        elif method == "initialize":
            info = {"name": "asker", "version": "1.0"}
            caps: dict[str, object] = {"tools": {}}
            send({"id": rid, "result": {"protocolVersion": "2025-11-25", "capabilities": caps, "serverInfo": info}})
        elif method == "server/discover" and os.environ.get("ASK_REFUSE") == "discover" and not refused:
            refused = True  # once: -32022 naming a version, which the client probes again at
            data = {"supported": ["2026-07-28"], "requested": "x"}
            send({"id": rid, "error": {"code": -32022, "message": "Unsupported protocol version", "data": data}})
        elif method == "server/discover" and os.environ.get("ASK_REFUSE") == "initialize" and not refused:
            send({"id": rid, "error": {"code": -32601, "message": "Method not found"}})
        elif method == "server/discover":
            meta = {"io.modelcontextprotocol/serverInfo": {"name": "asker", "version": "1.0"}}
            result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "_meta": meta}
            send({"id": rid, "result": {**result, "ttlMs": 0, "cacheScope": "private", "resultType": "complete"}})
        elif method == "tools/list":  # the SDK client lists before its first call
            modern = "io.modelcontextprotocol/protocolVersion" in (message.get("params") or {}).get("_meta", {})
            cache = {"ttlMs": 0, "cacheScope": "private", "resultType": "complete"} if modern else {}
            send({"id": rid, "result": {"tools": [{"name": "hello", "inputSchema": {"type": "object"}}], **cache}})
        elif method == "tools/call":
            ask()
            result: dict[str, object] = {"content": [{"type": "text", "text": "hello"}], "isError": False}
            if "io.modelcontextprotocol/protocolVersion" in (message.get("params") or {}).get("_meta", {}):
                result["resultType"] = "complete"  # a 2026 result must say so
            send({"id": rid, "result": result})
        elif rid is not None and method is not None:
            send({"id": rid, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()

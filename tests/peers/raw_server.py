"""A real MCP server on stdio written without the SDK: it answers in bytes the test chooses.

For the fast-path tests (tests/test_proxy_fastpath.py): every line it receives is appended to
``$RAW_LOG`` (so a test sees exactly what reached the child: ids, names, cancellations), and its
answers have an odd key order, spacing and escapes that any re-serialisation would change.
It speaks 2025-11-25 only (``server/discover`` is "method not found", as for older servers).

Tools: ``echo_line`` (the request line as received), ``odd`` (a fixed, oddly formatted result),
``slow`` (never answers; cancellation is logged), ``ask`` (answers ``input_required``),
``progress`` (two progress notifications for the request's token, a log line, then an answer),
``die`` (exits mid-call), ``put`` (a write the policy proposes: a test asserts it never arrives).
One resource ``raw://note`` (read in odd bytes; ``raw://die`` exits mid-read), one resource
template ``raw://{name}`` and one prompt ``hello`` (its messages echo the request line).
``completion/complete`` answers fixed odd bytes for any ref (``RAW_NO_COMPLETIONS`` set: the
capability is not advertised, and the method is not found).
"""

from __future__ import annotations

import json
import os
import sys

TOOLS = ["echo_line", "odd", "slow", "progress", "die", "put", "ask"]
NOTE = '{"id":%s, "result":{"contents":[{"uri":"raw://note","text":"\\u00e9t\u00e9"}]},"jsonrpc":"2.0"}'
COMPLETE = '{"result":{"completion":{"values":["h\\u00e9llo", "hi"],"total":2}},"jsonrpc":"2.0" ,"id":%s}'
COMPLETIONS = not os.environ.get("RAW_NO_COMPLETIONS")
ODD = '{"result" : {"content":[{"type":"text","text":"caf\\u00e9 \\"q\\" \u00fc"}],"_meta":{"n":1.50,"big":12345678901234567890123},"isError":false},  "jsonrpc":"2.0","id":%s}'  # noqa: E501


def send(fields: str) -> None:
    sys.stdout.write(fields + "\n")
    sys.stdout.flush()


def answer(rid: object, result: dict[str, object]) -> None:
    send(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}))


def main() -> None:
    log = open(os.environ["RAW_LOG"], "a", encoding="utf-8")  # noqa: SIM115 - the process's lifetime
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8").rstrip("\n")
        log.write(line + "\n")
        log.flush()
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if rid is None:
            continue  # notifications (cancellations are in the log)
        params = message.get("params") or {}
        if method == "initialize":
            info = {"name": "raw", "version": "1"}
            caps = {"tools": {}, "logging": {}, "resources": {}, "prompts": {}}
            if COMPLETIONS:
                caps["completions"] = {}
            answer(rid, {"protocolVersion": "2025-11-25", "capabilities": caps, "serverInfo": info})
        elif method == "tools/list":
            variant = os.environ.get("RAW_VARIANT", "")  # a changed definition, for pinning tests
            tools = [{"name": n, "description": n + variant, "inputSchema": {"type": "object"}} for n in TOOLS]
            answer(rid, {"tools": tools})
        elif method == "resources/list":
            answer(rid, {"resources": [{"uri": "raw://note", "name": "note"}, {"uri": "raw://die", "name": "die"}]})
        elif method == "resources/read":
            if params.get("uri") == "raw://die":
                os._exit(3)
            send(NOTE % json.dumps(rid))
        elif method == "resources/templates/list":
            answer(rid, {"resourceTemplates": [{"uriTemplate": "raw://{name}", "name": "named"}]})
        elif method == "completion/complete" and COMPLETIONS:
            send(COMPLETE % json.dumps(rid))
        elif method == "prompts/list":
            answer(rid, {"prompts": [{"name": "hello", "arguments": [{"name": "who"}]}]})
        elif method == "prompts/get":
            answer(rid, {"messages": [{"role": "user", "content": {"type": "text", "text": line}}]})
        elif method == "logging/setLevel":
            answer(rid, {})
        elif method == "tools/call":
            tool = params.get("name")
            if tool == "echo_line":
                answer(rid, {"content": [{"type": "text", "text": line}], "isError": False})
            elif tool == "odd":
                send(ODD % json.dumps(rid))
            elif tool == "progress":
                token = (params.get("_meta") or {}).get("progressToken")
                for step in (1, 2):
                    progress = {"progressToken": token, "progress": step, "total": 2}
                    send(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress}))
                note = {"level": "info", "logger": "raw", "data": "progress done"}
                send(json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": note}))
                answer(rid, {"content": [{"type": "text", "text": "done"}], "isError": False})
            elif tool == "die":
                os._exit(3)
            elif tool == "slow":
                continue
            elif tool == "ask":  # a 2026-only answer a proxy cannot relay (nothing asks the host back)
                answer(rid, {"resultType": "input_required", "inputRequests": {}})
            else:
                answer(rid, {"content": [{"type": "text", "text": f"did {tool}"}], "isError": False})
        else:
            send(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}}))


if __name__ == "__main__":
    main()

"""A scripted agent for the tour: the official MCP Python SDK client, talking to
``gatekeeper proxy`` in front of the demo notes server. It reads a note, proposes a new one,
and waits (asking ``gatekeeper_proposal_status``) until a person has decided."""

from __future__ import annotations

import argparse
import json
import sys
import time

import anyio
from mcp import Client, StdioServerParameters


async def run(policy: str, home: str, timeout: float) -> int:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gatekeeper", "--home", home, "proxy", "--policy", policy],
        env={"GATEKEEPER_HOME": home, "PATH": _path()},
    )
    async with Client(params) as client:
        say(f"agent: connected to Gatekeeper (protocol {client.protocol_version})")
        names = [t.name for t in (await client.list_tools()).tools]
        say(f"agent: tools I can see: {', '.join(names)}")
        notes = await client.call_tool("list_notes", {})
        say(f"agent: list_notes → {text(notes)}")
        first = await client.call_tool("read_note", {"path": "notes/welcome.md"})
        say(f"agent: read_note notes/welcome.md → {text(first)!r}")
        body = "# Ideas from the agent\n\n- Try Gatekeeper with a real host.\n- Keep every write reviewable.\n"
        result = await client.call_tool("create_note", {"title": "Ideas from the agent", "body": body})
        summary = result.structured_content or {}
        if result.is_error:
            say(f"agent: the proposal was refused: {text(result)}")
            return 1
        pid = summary["proposal_id"]
        say(f"agent: proposed {summary['destination']} ({summary['size']} bytes); nothing is written yet.")
        say(f"\n>>> Review it here: {summary['review_url']}\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = await client.call_tool("gatekeeper_proposal_status", {"proposal_id": pid})
            state = (status.structured_content or {}).get("status")
            if state not in ("pending", "approved"):
                say(f"agent: {text(status)}")
                print(json.dumps({"proposal_id": pid, "status": state}), file=sys.stderr)
                return 0 if state == "committed" else 3
            await anyio.sleep(0.5)
        say("agent: nobody decided in time; the proposal stays pending.")
        return 2


def text(result: object) -> str:
    return " ".join(getattr(c, "text", "") for c in getattr(result, "content", []))


def say(line: str) -> None:
    print(line, flush=True)


def _path() -> str:
    import os

    return os.environ.get("PATH", "/usr/bin:/bin")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policy", required=True)
    parser.add_argument("--home", required=True)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    raise SystemExit(anyio.run(run, args.policy, args.home, args.timeout))


if __name__ == "__main__":
    main()

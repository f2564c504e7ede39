"""Real servers' ``tools/list`` answers, taken raw (no SDK between us and the bytes), and recorded.

Pin digests are taken of each listed tool's definition (proxy/catalog.py), so every rewrite of the
path from a child's bytes to a digest is checked against these: what real servers list, tool by
tool, as they put it on the wire. ``python -m tests.peers.listings`` records them again into
``tests/peers/listings/`` (the npm filesystem server, mcp-server-git, the Python SDK 1.x notes
server, server-everything, and our own notes and probe servers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import line_queue, next_line

RECORDED = Path(__file__).resolve().parent / "listings"
REPO = Path(__file__).resolve().parent.parent.parent


def raw_listing(argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 30) -> list[Any]:
    """Every tool a stdio server lists after a 2025-11-25 handshake, page by page, as sent."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines = line_queue(proc.stdout)

    def ask(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n")
        proc.stdin.flush()
        while True:
            answer = json.loads(next_line(lines, timeout, f"{argv[0]}'s answer to {method}"))
            if answer.get("id") == rid:
                assert "result" in answer, answer
                result: dict[str, Any] = answer["result"]
                return result

    try:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "rec", "version": "0"}}
        ask(1, "initialize", init)
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        tools: list[Any] = []
        cursor: str | None = None
        for rid in range(2, 100):
            page = ask(rid, "tools/list", {"cursor": cursor} if cursor else {})
            tools += page["tools"]
            if (cursor := page.get("nextCursor")) is None:
                return tools
        raise AssertionError(f"{argv[0]} lists more than 98 pages of tools")
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def servers(workspace: Path) -> dict[str, list[str]]:
    """The servers whose listings are recorded, each as the command that starts it on stdio."""
    from tests.peers.external import everything_server, filesystem_server, git_server, old_sdk_python

    return {
        "notes": [sys.executable, "-m", "gatekeeper.demo.notes_server", str(workspace)],
        "probe": [sys.executable, "-m", "tests.peers.probe_server"],
        "old_sdk_notes": [str(old_sdk_python()), str(Path(__file__).parent / "old_sdk_notes.py"), str(workspace)],
        "npm_filesystem": [str(filesystem_server()), str(workspace)],
        "git": [str(git_server()), "--repository", str(workspace)],
        "everything": [str(everything_server())],
    }


def record(workspace: Path) -> None:
    RECORDED.mkdir(exist_ok=True)
    for name, argv in servers(workspace).items():
        tools = raw_listing(argv, cwd=REPO)
        (RECORDED / f"{name}.json").write_text(json.dumps(tools, indent=1, ensure_ascii=False) + "\n")
        print(f"{name}: {len(tools)} tools", file=sys.stderr)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "notes").mkdir()
        subprocess.run(["git", "init", "-q", tmp], check=True)
        record(Path(tmp))

"""A notes server written the way most servers in the wild are: the Python SDK 1.x ``FastMCP``.

It runs in its own venv (``mcp==1.6.0``, ``pydantic==2.10.6``, installed by
scripts/install_peers.py), never in Gatekeeper's: the 1.x API is gone from ``mcp`` 2.x.
Two traits matter to Gatekeeper, both real 1.x behaviour, not planted:
- it fails validation on the 2026 ``server/discover`` probe and closes the connection;
- it does not exit when its stdin ends, so whoever started it must end it.

If ``$OLD_NOTES_PID_DIR`` is set, it writes a file named by its pid there at start, holding
its parent's pid (the proxy), so a test can find every copy that was started and check that
none outlives the proxy.

Usage: ``<old-sdk venv>/bin/python tests/peers/old_sdk_notes.py NOTES_DIR``
"""

import os
import re
import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP

ROOT = Path(sys.argv[1]).resolve()
mcp = FastMCP("old-notes")


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:80] or "untitled"


def _inside(rel: str) -> Path:
    path = (ROOT / rel).resolve()
    if ROOT not in path.parents:
        raise ValueError(f"{rel!r} is outside the notes folder")
    return path


@mcp.tool()
def add_note(title: str, body: str) -> str:
    """Create notes/<slug of title>.md with the given body."""
    path = _inside(f"notes/{_slug(title)}.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x", encoding="utf-8") as f:
        f.write(body)
    return str(path.relative_to(ROOT))


@mcp.tool()
def read_note(path: str) -> str:
    """Read one note by its relative path, e.g. notes/hello.md."""
    return _inside(path).read_text(encoding="utf-8")


@mcp.tool()
def server_pid() -> int:
    """This process's id, so a test can kill it."""
    return os.getpid()


@mcp.resource("notes://index")
def index() -> str:
    """Every note, one relative path a line."""
    return "\n".join(sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.md") if p.is_file()))


if __name__ == "__main__":
    pid_dir = os.environ.get("OLD_NOTES_PID_DIR")
    if pid_dir:
        Path(pid_dir, str(os.getpid())).write_text(f"{os.getppid()}\n")
    mcp.run()

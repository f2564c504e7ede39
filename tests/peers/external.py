"""Fixtures for real MCP software nobody on this team wrote (installed by scripts/install_peers.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.requirements import missing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "scripts"))

from install_peers import PeerUnavailable, ensure_filesystem_server, ensure_git_server


def filesystem_server() -> Path:
    try:
        return ensure_filesystem_server()
    except PeerUnavailable as exc:
        missing("the reference filesystem server", f"scripts/install_peers.py could not install it: {exc}")


def git_server() -> Path:
    try:
        return ensure_git_server()
    except PeerUnavailable as exc:
        missing("mcp-server-git", f"scripts/install_peers.py could not install it: {exc}")

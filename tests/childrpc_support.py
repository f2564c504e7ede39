"""Real stdio servers spoken to two ways: our client (proxy/servers/stdio/rpc.py + negotiate.py) and the SDK's."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from gatekeeper.proxy.servers.stdio.handshake import Negotiated, negotiate
from gatekeeper.proxy.servers.stdio.process import ChildProcess, child_process
from gatekeeper.proxy.servers.stdio.rpc import ChildSession, Notify, OnLog, serving
from tests.peers.external import PEERS, filesystem_server, git_server, old_sdk_python
from tests.proxy_support import PY, REPO

PEER_NAMES = ("notes", "probe", "fs", "git", "old")


def peer(name: str, tmp: Path) -> StdioServerParameters:
    """One real server, set up in ``tmp``: the bundled notes server, the probe server, the npm
    filesystem server, mcp-server-git, and the notes server on the 1.x SDK (dies on discover)."""
    workspace = tmp / "workspace"
    (workspace / "notes").mkdir(parents=True, exist_ok=True)
    (workspace / "notes" / "seed.md").write_text("seeded\n")
    env = {"PYTHONPATH": str(REPO)}
    if name == "notes":
        return StdioServerParameters(command=PY, args=["-m", "gatekeeper.demo.notes_server", str(workspace)], env=env)
    if name == "probe":
        return StdioServerParameters(command=PY, args=["-m", "tests.peers.probe_server"], env=env, cwd=str(REPO))
    if name == "fs":
        return StdioServerParameters(command=str(filesystem_server()), args=[str(workspace)])
    if name == "git":
        repo = tmp / "repo"
        if not repo.exists():
            repo.mkdir()
            for cmd in (
                ["git", "init", "-q"],
                ["git", "config", "user.name", "T"],
                ["git", "config", "user.email", "t@x"],
            ):
                subprocess.run(cmd, cwd=repo, check=True)
            (repo / "a.txt").write_text("a\n")
            subprocess.run(["git", "add", "a.txt"], cwd=repo, check=True)
            subprocess.run(["git", "commit", "-qm", "first"], cwd=repo, check=True)
        return StdioServerParameters(command=str(git_server()), args=["--repository", str(repo)])
    if name == "old":
        return StdioServerParameters(
            command=str(old_sdk_python()), args=[str(PEERS / "old_sdk_notes.py"), str(workspace)]
        )
    raise ValueError(name)


def roots_of(tmp: Path) -> dict[str, Any]:
    """What the proxy answers a child's ``roots/list`` (Downstream._roots), as a raw result."""
    return {"roots": [{"uri": (tmp / "workspace").as_uri(), "name": "peer workspace"}]}


@asynccontextmanager
async def lean(
    params: StdioServerParameters,
    tmp: Path,
    mode: str = "auto",
    *,
    on_log: OnLog | None = None,
    on_notify: Notify | None = None,
) -> AsyncIterator[tuple[ChildSession, Negotiated, ChildProcess]]:
    """Our client on a freshly started child, negotiated in ``mode``; the child is ended on exit."""
    with open(tmp / "child-stderr.log", "a") as errlog:
        async with child_process(params, errlog) as process:

            async def roots() -> dict[str, Any]:
                return roots_of(tmp)

            session = ChildSession(process.stdin.send, name="peer", on_log=on_log, on_notify=on_notify, roots=roots)
            async with serving(session, process.stdout):
                negotiated = await negotiate(session, mode)
                yield session, negotiated, process


@asynccontextmanager
async def sdk(params: StdioServerParameters, tmp: Path, mode: str = "auto") -> AsyncIterator[Client]:
    """The SDK client as the proxy configures it toward a child (proxy/servers/downstream.py)."""

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult.model_validate(roots_of(tmp))

    with open(tmp / "sdk-stderr.log", "a") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog), mode=mode, cache=None, log_level="debug", list_roots_callback=roots
        ) as client:
            yield client


def dump(model: Any) -> Any:
    """An SDK model as its wire dict (how the proxy's dumps compare)."""
    return None if model is None else model.model_dump(mode="json", by_alias=True, exclude_none=True)

"""Each server's tools, listed once as the proxy lists them, for ``gatekeeper policy check``.

Every server is started (a url server connected to) through the proxy's own ``Downstream``, its
``tools/list`` read page by page, and the server closed again: what the check compares the rules
with is what an agent's proxy would see. Nothing is recorded (no pins, no audit events). A server
that cannot be listed maps to the reason, which the check reports instead of passing silently.
"""

from __future__ import annotations

import asyncio
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio

from gatekeeper.policy import Policy, Server
from gatekeeper.proxy.protocol.rpc import Json

Listed = dict[str, Json] | str  # tool name -> its listed definition, or why the server was not listed


async def _quiet(*_: Any) -> None:
    return None


async def _list_one(name: str, config: Server, log_dir: Path) -> Listed:
    from gatekeeper.proxy.listing import ListingError, cut_repr
    from gatekeeper.proxy.protocol.rpc import RpcError
    from gatekeeper.proxy.servers.downstream import Downstream
    from gatekeeper.proxy.servers.face import DownstreamGone, DownstreamUnavailable

    server = Downstream(name, config, log_dir, on_message=_quiet, on_log=_quiet, on_event=_quiet, mode="auto")
    tools: dict[str, Json] = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.supervise)
        try:
            await server.ready()
            cursor = None
            while True:
                page = await server.request("tools/list", None if cursor is None else {"cursor": cursor})
                listed = page.get("tools")
                if not isinstance(listed, list):
                    raise ListingError(f"its tools/list answer has no list of tools: {cut_repr(page)}")
                tools |= {t["name"]: t for t in listed if isinstance(t, dict) and isinstance(t.get("name"), str)}
                cursor = page.get("nextCursor")
                if not isinstance(cursor, str):
                    break
        except (DownstreamUnavailable, DownstreamGone, ListingError) as exc:
            return str(exc)
        except RpcError as exc:
            return f"its tools/list failed: {exc.message}"
        finally:
            await server.close()
    return tools


async def _list_all(servers: dict[str, Server], log_dir: Path) -> dict[str, Listed]:
    found: dict[str, Listed] = {}

    async def one(name: str, config: Server) -> None:
        found[name] = await _list_one(name, config, log_dir)

    async with anyio.create_task_group() as tg:
        for name, config in servers.items():
            tg.start_soon(one, name, config)
    return found


def list_tools(policy: Policy, names: list[str]) -> dict[str, Listed]:
    """The tools each named server of ``policy`` lists now, all started at once (stderr to a
    temporary folder: a check leaves nothing behind). Called where an event loop already runs (a
    command invoked from async code), the listing gets a thread and a loop of its own."""
    servers = {name: policy.servers[name] for name in names}
    with tempfile.TemporaryDirectory(prefix="gatekeeper-check-") as logs:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return anyio.run(_list_all, servers, Path(logs))
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(anyio.run, _list_all, servers, Path(logs)).result()

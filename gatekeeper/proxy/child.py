"""A downstream server as a child process on stdio, and how it is ended.

Why not the SDK's ``stdio_client``: its shutdown waits 2 s after closing stdin and 2 s more
after SIGTERM. Hosts give the proxy 2 s in all between closing its stdin and their own
SIGTERM, and servers on the 1.x SDK never exit on stdin EOF, so every host restart left one
behind. Here the same sequence (EOF, grace, SIGTERM to the child's process group, SIGKILL)
runs within ``STOP_BUDGET``. The child gets its own session, like the SDK does, so a signal
meant for the proxy's group does not reach it before the proxy can end it in order.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import TextIO

import anyio
import anyio.lowlevel
import mcp_types
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream
from mcp import StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from gatekeeper.home import user_umask

EOF_GRACE = 0.4  # a well-behaved server exits on stdin EOF well within this
TERM_GRACE = 0.4
KILL_REAP = 0.3
STOP_BUDGET = EOF_GRACE + TERM_GRACE + KILL_REAP  # < the hosts' 2 s, with room for the proxy's own exit
_POLL = 0.01
log = logging.getLogger("gatekeeper.proxy")


@asynccontextmanager
async def child_stdio(params: StdioServerParameters, errlog: TextIO) -> AsyncIterator[TransportStreams]:
    """Spawn the server, bridge its pipes to the session's streams, and always end it on exit."""
    process = await anyio.open_process(
        [params.command, *params.args],
        env=get_default_environment() | (params.env or {}),
        stderr=errlog,
        cwd=params.cwd,
        start_new_session=True,
        umask=user_umask(),  # not the proxy's private 077: files the server makes are the user's
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def stdout_reader() -> None:
        assert process.stdout is not None
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError, OSError):
            async with read_writer:
                buffer = ""
                async for chunk in TextReceiveStream(process.stdout, errors="replace"):
                    lines = (buffer + chunk).split("\n")
                    buffer = lines.pop()
                    for line in lines:
                        await read_writer.send(_parse(line))

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session must see the end, not wait forever

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):  # the child must end even when we are cancelled
                write_stream.close()
                read_stream.close()
                await stop(process)
            tg.cancel_scope.cancel()


def _parse(line: str) -> SessionMessage | Exception:
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # junk on the child's stdout: the session logs it and goes on
        return exc


async def stop(process: Process) -> None:
    """End the child: close its stdin, a short grace, SIGTERM to its group, then SIGKILL."""
    start = anyio.current_time()
    how = "stdin EOF"
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if process.stdin is not None:
            await process.stdin.aclose()
    if not await _exited(process, EOF_GRACE):
        how = "SIGTERM"
        _signal_group(process.pid, signal.SIGTERM)
        if not await _exited(process, TERM_GRACE):
            how = "SIGKILL"
            _signal_group(process.pid, signal.SIGKILL)
            if not await _exited(process, KILL_REAP):
                how = "nothing (abandoned after SIGKILL)"
    log.info("child %d ended by %s in %.2f s", process.pid, how, anyio.current_time() - start)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if process.stdout is not None:
            await process.stdout.aclose()
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    with suppress(Exception):  # else asyncio warns at GC about a transport left open
        transport.close()  # type: ignore[union-attr]


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # the child leads its own group (start_new_session)


async def _exited(process: Process, timeout: float) -> bool:
    """Poll the return code: ``process.wait()`` also waits for pipe EOF, which a grandchild may hold."""
    deadline = anyio.current_time() + timeout
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(_POLL)
    return True

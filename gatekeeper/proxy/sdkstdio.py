"""The host's stdio as the SDK ``Server``'s streams (``GATEKEEPER_PROXY_HOST=sdk``, the fallback host).

Kept apart from ``hostio`` so the lean host (the default) never imports the SDK's stream and
message types, nor ``wire`` (pydantic): those load only when the SDK host is asked for. Lines
are read as the lean host reads them (``hostio.HostIn``), each checked by ``wire.parse`` and handed
to the SDK server in order; a stdin that is a regular file is read in a thread by ``wire.Wire``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from gatekeeper.proxy import wire
from gatekeeper.proxy.hostio import HostIn, HostOut, LineSplitter, OnLine, claim, pollable

log = logging.getLogger("gatekeeper.proxy.wire")


@asynccontextmanager
async def host_stdio(
    on_refusal: wire.OnRefusal, limit: int, fast: OnLine | None = None
) -> AsyncIterator[tuple[Any, Any, HostOut]]:
    """The SDK server's (read, write) streams over the host's stdio, and the shared writer."""
    in_fd = claim(0, lambda: os.open(os.devnull, os.O_RDONLY))
    out_fd = claim(1, lambda: os.dup(2))
    out = HostOut(out_fd if out_fd is not None else sys.stdout.fileno())
    await out.open()
    read_send, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_recv = create_context_streams[SessionMessage](0)

    async def writer() -> None:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async with write_recv:
                async for message in write_recv:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    out.write(data.encode("utf-8") + b"\n")
                    await out.drain()

    async def answer(message: SessionMessage) -> None:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await write_stream.send(message)

    host_in = HostIn(on_refusal, limit, fast)
    out.resubmit = host_in.resubmit
    transport: asyncio.BaseTransport | None = None
    source = os.fdopen(in_fd, "rb", closefd=False) if in_fd is not None else sys.stdin.buffer
    try:
        if not pollable(source.fileno()):
            raise ValueError("not a pipe or socket")
        transport, protocol = await asyncio.get_running_loop().connect_read_pipe(lambda: LineSplitter(host_in), source)
        host_in.protocol = protocol
    except (ValueError, OSError):  # not a pipe (a regular file): read it in a thread, as before
        transport = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            if transport is not None:
                tg.start_soon(pump, host_in, read_send, answer)
            else:
                tg.start_soon(_threaded, wire.Wire(source, on_refusal, limit), read_send, answer)
            try:
                yield read_stream, write_stream, out
            finally:
                write_stream.close()
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if transport is not None:
                transport.close()
            await out.aclose()


async def pump(host_in: HostIn, send: Any, answer: Any) -> None:
    """Check each queued line and hand it to the SDK (or answer its refusal), in order."""
    async with send:
        while (item := await host_in.take()) is not None:
            line, size = item
            if not line.strip():
                continue  # a blank line is framing, not a message
            outcome = wire.parse(line, size=len(line) if size is None else size, limit=host_in.limit)
            if isinstance(outcome, wire.Refusal):
                log.warning("refused a message from the host: %s (%d bytes)", outcome.reason, outcome.size)
                await answer(outcome.response())
                try:
                    await host_in.on_refusal(outcome.payload())
                except Exception:
                    log.exception("could not report a refused message")
                continue
            await send.send(SessionMessage(outcome))


async def _threaded(source: wire.Wire, send: Any, answer: Any) -> None:
    """The fallback reader: lines read in a worker thread, checked as ``wire.Wire`` does."""
    source.answer_with(answer)
    async with send:
        async for message in source:
            await send.send(SessionMessage(message))

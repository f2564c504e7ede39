"""The host's two stdio pipes, owned on the event loop: no worker-thread hop per message.

Stdin is read by an asyncio pipe protocol on a private duplicate of fd 0 (fd 0 then points at
the null device, fd 1 at stderr, as the SDK's own stdio server does), and split into lines.
Each line is first offered to the fast path (``proxy/fastpath.py``); what it does not take is
checked by ``wire.parse`` and handed to the SDK server, in order. Stdout has ONE writer: the SDK
server's messages and the fast path's raw lines both go through ``HostOut.write``, whole lines
only, so they never interleave. A host that stops reading does not block the loop: the pipe
transport buffers, the SDK's writer waits for the buffer to drain, and the fast path steps
aside (``HostOut.congested``) so its lines wait on the SDK's path too.

Where stdin or stdout is not a pipe, socket or terminal (a regular file), the thread-based
reader of ``wire.Wire`` and blocking writes are used instead.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from gatekeeper.proxy import wire

log = logging.getLogger("gatekeeper.proxy.wire")

HIGH_WATER = 1024 * 1024
"""Bytes buffered toward the host before writers wait (and the fast path steps aside)."""
_QUEUE_HIGH, _QUEUE_LOW = 64, 16  # lines waiting for the SDK: pause reading the host above, resume below
_DRAIN_AT_EXIT = 1.5  # seconds to flush what is buffered for the host when the proxy ends
OnLine = Callable[[bytes], bool]
"""The fast path's offer: True if it took the line (and answered or forwarded it)."""


class HostOut:
    """The only writer of the host's stdout: whole lines, in the order written."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._transport: asyncio.WriteTransport | None = None
        self.protocol: _OutProtocol | None = None
        self.closed = False
        self.resubmit: Callable[[bytes], None] | None = None  # a host line for the SDK path, past the fast one

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        if not pollable(self._fd):
            return  # a regular file: blocking writes never stall for long
        try:
            file = os.fdopen(self._fd, "wb", closefd=False)
            transport, protocol = await loop.connect_write_pipe(_OutProtocol, file)
        except (ValueError, OSError):  # a regular file: blocking writes never stall for long
            return
        transport.set_write_buffer_limits(high=HIGH_WATER)
        self._transport, self.protocol = transport, protocol

    @property
    def congested(self) -> bool:
        """True while the host is not reading fast enough (lines are piling up in our buffer)."""
        transport = self._transport
        return self.closed or (transport is not None and transport.get_write_buffer_size() > HIGH_WATER)

    def write(self, data: bytes) -> None:
        """One or more whole lines; never blocks the loop when stdout is a pipe."""
        if self.closed:
            return
        if self._transport is not None:
            if self._transport.is_closing():
                self.closed = True
                return
            self._transport.write(data)
            return
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            self.closed = True

    async def drain(self) -> None:
        if self.protocol is not None:
            await self.protocol.wait_writable()

    async def aclose(self) -> None:
        """Flush what is buffered (bounded), then close."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        with anyio.move_on_after(_DRAIN_AT_EXIT):
            while transport.get_write_buffer_size() and not transport.is_closing():
                await anyio.sleep(0.01)
        transport.close()
        self.closed = True


class _OutProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self._writable = asyncio.Event()
        self._writable.set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._writable.set()  # writers must not wait forever on a host that is gone

    async def wait_writable(self) -> None:
        await self._writable.wait()


class _InProtocol(asyncio.Protocol):
    """Splits the host's bytes into lines; over-long lines are cut to their first MiB and sized."""

    def __init__(self, reader: HostIn) -> None:
        self._reader = reader
        self._buffer = bytearray()
        self._skipping: bytearray | None = None  # the start of an over-long line being skipped
        self._skipped = 0
        self.transport: asyncio.ReadTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        limit = self._reader.limit
        if self._skipping is not None:
            end = data.find(b"\n")
            if end < 0:
                self._skipped += len(data)
                return
            self._skipped += len(data[:end].rstrip(b"\r"))
            self._reader.line(bytes(self._skipping), self._skipped)
            self._skipping = None
            data = data[end + 1 :]
        buffer = self._buffer
        buffer += data
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            line = bytes(buffer[start:end])
            start = end + 1
            self._reader.line(line.rstrip(b"\r"), None)
        del buffer[:start]
        if len(buffer) > limit + 1:  # no line ending within the cap: skip the rest of this line
            self._skipping = bytearray(buffer[: wire.SCAN_BYTES])
            self._skipped = len(buffer)
            buffer.clear()

    def eof_received(self) -> bool:
        if self._skipping is not None:
            self._reader.line(bytes(self._skipping), self._skipped)
        elif self._buffer:
            self._reader.line(bytes(self._buffer).rstrip(b"\r"), None)
        self._buffer.clear()
        self._reader.end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._reader.end()


class HostIn:
    """Lines from the host: the fast path's first, the rest in order to the SDK server."""

    def __init__(self, on_refusal: wire.OnRefusal, limit: int, fast: OnLine | None) -> None:
        self.limit = limit
        self._on_refusal = on_refusal
        self._fast = fast
        self._queue: deque[tuple[bytes, int | None] | None] = deque()
        self._wake = asyncio.Event()
        self.protocol: _InProtocol | None = None  # set once the pipe is connected
        self._paused = False

    def line(self, line: bytes, size: int | None) -> None:
        """Called on the loop for each line (``size`` set only for a cut over-long one)."""
        if size is None and self._fast is not None and len(line) <= self.limit:
            try:
                if self._fast(line):
                    return
            except Exception:  # the SDK path answers whatever the fast path could not
                log.exception("fast path failed on a host line; using the SDK path")
        self._queue.append((line, size))
        self._wake.set()
        if len(self._queue) > _QUEUE_HIGH and not self._paused and self.protocol and self.protocol.transport:
            self._paused = True
            self.protocol.transport.pause_reading()

    def resubmit(self, line: bytes) -> None:
        """A line the fast path took but hands back (its server never got it): the SDK path's."""
        self._queue.append((line, None))
        self._wake.set()

    def end(self) -> None:
        if not self._queue or self._queue[-1] is not None:
            self._queue.append(None)
        self._wake.set()

    async def take(self) -> tuple[bytes, int | None] | None:
        """The next line and its cut size (None at the end of input); reading resumes once few wait."""
        while not self._queue:
            self._wake.clear()
            await self._wake.wait()
        item = self._queue.popleft()
        if self._paused and len(self._queue) < _QUEUE_LOW and self.protocol and self.protocol.transport:
            self._paused = False
            self.protocol.transport.resume_reading()
        return item

    async def pump(self, send: Any, answer: Any) -> None:
        """Check each queued line and hand it to the SDK (or answer its refusal), in order."""
        async with send:
            while (item := await self.take()) is not None:
                line, size = item
                if not line.strip():
                    continue  # a blank line is framing, not a message
                outcome = wire.parse(line, size=len(line) if size is None else size, limit=self.limit)
                if isinstance(outcome, wire.Refusal):
                    log.warning("refused a message from the host: %s (%d bytes)", outcome.reason, outcome.size)
                    await answer(outcome.response())
                    try:
                        await self._on_refusal(outcome.payload())
                    except Exception:
                        log.exception("could not report a refused message")
                    continue
                await send.send(SessionMessage(outcome))


def pollable(fd: int) -> bool:
    """True for a pipe or a socket: what every event loop can watch. Asked before the loop is:
    asyncio refuses a regular file with ValueError, but uvloop (libuv) aborts the process."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _claim(fd: int, diversion: Callable[[], int]) -> int | None:
    """A private duplicate of ``fd`` (kept off 0-2), with ``fd`` pointed at ``diversion``."""
    import fcntl

    try:
        private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        return None
    try:
        other = diversion()
        os.dup2(other, fd)
        os.close(other)
    except OSError:
        pass
    return private


@asynccontextmanager
async def host_stdio(
    on_refusal: wire.OnRefusal, limit: int, fast: OnLine | None = None
) -> AsyncIterator[tuple[Any, Any, HostOut]]:
    """The SDK server's (read, write) streams over the host's stdio, and the shared writer."""
    in_fd = _claim(0, lambda: os.open(os.devnull, os.O_RDONLY))
    out_fd = _claim(1, lambda: os.dup(2))
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
        transport, protocol = await asyncio.get_running_loop().connect_read_pipe(lambda: _InProtocol(host_in), source)
        host_in.protocol = protocol
    except (ValueError, OSError):  # not a pipe (a regular file): read it in a thread, as before
        transport = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            if transport is not None:
                tg.start_soon(host_in.pump, read_send, answer)
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


@asynccontextmanager
async def lean_stdio(
    on_refusal: wire.OnRefusal, limit: int, fast: OnLine | None = None
) -> AsyncIterator[tuple[HostIn, HostOut]]:
    """The host's pipes without the SDK's streams (``GATEKEEPER_PROXY_HOST=lean``): queued lines, one writer.

    Pipes and sockets only (``pollable``); the caller keeps the SDK host for regular files."""
    in_fd = _claim(0, lambda: os.open(os.devnull, os.O_RDONLY))
    out_fd = _claim(1, lambda: os.dup(2))
    out = HostOut(out_fd if out_fd is not None else sys.stdout.fileno())
    await out.open()
    host_in = HostIn(on_refusal, limit, fast)
    out.resubmit = host_in.resubmit
    source = os.fdopen(in_fd, "rb", closefd=False) if in_fd is not None else sys.stdin.buffer
    transport, protocol = await asyncio.get_running_loop().connect_read_pipe(lambda: _InProtocol(host_in), source)
    host_in.protocol = protocol
    try:
        yield host_in, out
    finally:
        with anyio.CancelScope(shield=True):
            transport.close()
            await out.aclose()


async def _threaded(source: wire.Wire, send: Any, answer: Any) -> None:
    """The fallback reader: lines read in a worker thread, checked as ``wire.Wire`` does."""
    source.answer_with(answer)
    async with send:
        async for message in source:
            await send.send(SessionMessage(message))

"""The host's stdio, owned on the event loop: no worker-thread hop per message.

Stdin is read by an asyncio pipe protocol on a private duplicate of fd 0 (fd 0 then points at
the null device, fd 1 at stderr, as the SDK's own stdio server does), and split into lines.
Each line is first offered to the fast path (``proxy/fast/path.py``); what it does not take waits
in ``HostIn`` for the session (proxy/session.py), in order.
Stdout has ONE writer: ``HostOut.write``, whole lines only, so answers never interleave. A host
that stops reading does not block the loop: the pipe transport buffers, writers wait for it to
drain, and the fast path steps aside (``HostOut.congested``) so its lines wait too.

Where stdin is not a pipe or socket (a regular file, a terminal) it is read in a worker thread,
block by block, into the same line splitter; where stdout is not, writes are blocking.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.to_thread

from gatekeeper.proxy.protocol.framing import Framer
from gatekeeper.proxy.protocol.limits import OnRefusal

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
        self.resubmit: Callable[[bytes], None] | None = None  # a host line for the regular path, past the fast one

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


class LineSplitter(asyncio.Protocol):
    """The host's bytes as lines (proxy/protocol/framing.py): over-long ones cut to their first MiB and sized."""

    def __init__(self, reader: HostIn) -> None:
        self._reader = reader
        self._framer = Framer(reader.line, reader.limit)
        self.data_received = self._framer.feed  # type: ignore[method-assign]  # no hop per read
        self.transport: asyncio.ReadTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def eof_received(self) -> bool:
        self._framer.finish()
        self._reader.end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._reader.end()


class HostIn:
    """Lines from the host: the fast path's first, the rest in order to the regular path."""

    def __init__(self, on_refusal: OnRefusal, limit: int, fast: OnLine | None) -> None:
        self.limit = limit
        self.on_refusal = on_refusal
        self._fast = fast
        self._queue: deque[tuple[bytes, int | None] | None] = deque()
        self._wake = asyncio.Event()
        self.protocol: LineSplitter | None = None  # set once the pipe is connected
        self._paused = False

    def line(self, line: bytes, size: int | None) -> None:
        """Called on the loop for each line (``size`` set only for a cut over-long one)."""
        if size is None and self._fast is not None and len(line) <= self.limit:
            try:
                if self._fast(line):
                    return
            except Exception:  # the regular path answers whatever the fast path could not
                log.exception("fast path failed on a host line; using the regular path")
        self._queue.append((line, size))
        self._wake.set()
        if len(self._queue) > _QUEUE_HIGH and not self._paused and self.protocol and self.protocol.transport:
            self._paused = True
            self.protocol.transport.pause_reading()

    def resubmit(self, line: bytes) -> None:
        """A line the fast path took but hands back (its server never got it): the regular path's."""
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


def pollable(fd: int) -> bool:
    """True for a pipe or a socket: what every event loop can watch. Asked before the loop is:
    asyncio refuses a regular file with ValueError, but uvloop (libuv) aborts the process."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def claim(fd: int, diversion: Callable[[], int]) -> int | None:
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
    on_refusal: OnRefusal, limit: int, fast: OnLine | None = None
) -> AsyncIterator[tuple[HostIn, HostOut]]:
    """The host's stdio for our own host side: queued lines in, one writer out.

    A pipe or socket is read on the loop; anything else (a regular file, a terminal) in a thread."""
    in_fd = claim(0, lambda: os.open(os.devnull, os.O_RDONLY))
    out_fd = claim(1, lambda: os.dup(2))
    out = HostOut(out_fd if out_fd is not None else sys.stdout.fileno())
    await out.open()
    host_in = HostIn(on_refusal, limit, fast)
    out.resubmit = host_in.resubmit
    fd = in_fd if in_fd is not None else sys.stdin.fileno()
    splitter = LineSplitter(host_in)
    transport: asyncio.BaseTransport | None = None
    if pollable(fd):
        source = os.fdopen(fd, "rb", closefd=False)
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: splitter, source)
        host_in.protocol = splitter
    try:
        async with anyio.create_task_group() as tg:
            if transport is None:
                reader = BlockReader(fd, splitter)
                host_in.protocol = splitter
                splitter.transport = reader  # type: ignore[assignment]
                tg.start_soon(reader.run)
            try:
                yield host_in, out
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if transport is not None:
                transport.close()
            await out.aclose()


class BlockReader:
    """Reads a stdin that no event loop can watch, in a worker thread, into the line splitter.

    Stands in for the pipe transport: ``HostIn`` pauses it while many lines wait, as it pauses a pipe."""

    BLOCK = 64 * 1024

    def __init__(self, fd: int, splitter: LineSplitter) -> None:
        self._fd, self._splitter = fd, splitter
        self._resumed = asyncio.Event()
        self._resumed.set()

    def pause_reading(self) -> None:
        self._resumed.clear()

    def resume_reading(self) -> None:
        self._resumed.set()

    async def run(self) -> None:
        """Until the end of the input (or a read error, which ends it too)."""
        while True:
            await self._resumed.wait()
            try:
                # abandoned on cancellation: a terminal's read may block until the user types
                data = await anyio.to_thread.run_sync(os.read, self._fd, self.BLOCK, abandon_on_cancel=True)
            except OSError as exc:
                log.warning("reading the host's input failed: %s; treating it as the end of input", exc)
                data = b""
            if not data:
                self._splitter.eof_received()
                return
            self._splitter.data_received(data)

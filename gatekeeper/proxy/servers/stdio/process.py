"""A downstream server as a child process on stdio, and how it is ended.

Why not the SDK's ``stdio_client``: its shutdown waits 2 s after closing stdin and 2 s more
after SIGTERM. Hosts give the proxy 2 s in all between closing its stdin and their own
SIGTERM, and servers on the 1.x SDK never exit on stdin EOF, so every host restart left one
behind. Here the same sequence (EOF, grace, SIGTERM to the child's process group, SIGKILL)
runs within ``STOP_BUDGET``. The child gets its own session, like the SDK does, so a signal
meant for the proxy's group does not reach it before the proxy can end it in order.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio

from gatekeeper import humane
from gatekeeper.home import user_umask
from gatekeeper.policy.commands import child_env
from gatekeeper.proxy.protocol.framing import CHILD_LINE_BYTES, Framer
from gatekeeper.proxy.servers import early

EOF_GRACE = 0.4  # a well-behaved server exits on stdin EOF well within this
TERM_GRACE = 0.4
KILL_REAP = 0.3
STOP_BUDGET = EOF_GRACE + TERM_GRACE + KILL_REAP  # < the hosts' 2 s, with room for the proxy's own exit
_POLL = 0.01
log = logging.getLogger("gatekeeper.proxy")


_PIPE_HIGH_WATER = 1024 * 1024  # bytes buffered toward the child before raw writes step aside
_QUEUE_HIGH, _QUEUE_LOW = 64, 16  # the child's lines waiting for our client: pause reading above, resume below
OnRefusal = Callable[[dict[str, Any]], None]
"""Told once when a child's output is refused: ``{why, size, limit}``."""


@dataclass(frozen=True)
class ChildCommand:
    """How to start a stdio server: the policy's command (resolved), args, env and cwd."""

    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: str | Path | None = None


class ChildPipe:
    """Raw access to one life of a child's pipes, beside our client's (proxy/servers/stdio/rpc.py).

    ``write`` puts whole lines on the child's stdin through the same asyncio transport the
    client's messages go through (so lines never interleave); ``tap`` sees each stdout line
    first and keeps the ones it answers for; ``on_end`` hears that stdout closed.
    """

    wants_headers = False  # the fast path stamps a pipe's requests without the HTTP headers

    def __init__(self) -> None:
        self._transport: asyncio.WriteTransport | None = None  # the client's stream's, written directly
        self.alive = False
        self.why: str | None = None  # why the proxy cut the child's output off, if it did
        self.tap: Callable[[bytes], bool] | None = None
        self.on_end: Callable[[ChildPipe], None] | None = None
        self.on_trouble: Callable[..., None] | None = None  # never called: a pipe's troubles end it (on_end)

    def attach(self, process: _Child) -> None:
        writer = getattr(process.stdin, "_stream", None)  # _ChildIn's asyncio StreamWriter
        if isinstance(writer, asyncio.StreamWriter):
            self._transport, self.alive = writer.transport, True

    def write(self, data: bytes) -> bool:
        """False (and nothing written) if the pipe is gone or the child is not keeping up."""
        transport = self._transport
        if not self.alive or transport is None or transport.is_closing():
            return False
        if transport.get_write_buffer_size() > _PIPE_HIGH_WATER:
            return False
        transport.write(data)  # what StreamWriter.write does, one call less per line
        return True

    def send(self, ours: str, data: bytes, headers: dict[str, str]) -> bool:
        """One raw request (the ``Carrier`` protocol of proxy/servers/carrier.py): a line; no headers on a pipe."""
        return self.write(data + b"\n")

    def cancel(self, ours: str, data: bytes, headers: dict[str, str]) -> None:
        self.write(data + b"\n")  # a late answer to it is dropped (FastPath.child_line)

    def ended(self, why: str | None = None) -> None:
        """Stdout closed; ``why`` is set when the proxy cut it off (proxy/protocol/framing.py)."""
        self.alive = False
        self.why = why
        if self.on_end is not None:
            self.on_end(self)

    def offer(self, line: bytes) -> bool:
        """True if the tap took the line; a failing tap leaves it to the client."""
        tap = self.tap
        if tap is None:
            return False
        try:
            return tap(line)
        except Exception:
            log.exception("fast path failed on a child's line; leaving it to the client")
            return False


@asynccontextmanager
async def child_process(
    params: ChildCommand,
    errlog: TextIO,
    pipe: ChildPipe | None = None,
    adopt: subprocess.Popen[bytes] | None = None,
    *,
    limit: int = CHILD_LINE_BYTES,
    on_refusal: OnRefusal | None = None,
) -> AsyncIterator[ChildProcess]:
    """The child itself (or the one proxy/servers/early.py started with the same parameters, adopted), for
    our client to read and write its lines (proxy/servers/stdio/rpc.py), none longer than ``limit``; always
    ended on exit."""
    process = await _start(params, errlog, adopt, _ChildOut.factory(pipe, limit, on_refusal))
    if pipe is not None:
        pipe.attach(process)
    try:
        yield process
    finally:
        with anyio.CancelScope(shield=True):
            await stop(process)


async def _start(
    params: ChildCommand,
    errlog: TextIO,
    adopt: subprocess.Popen[bytes] | None,
    out: Callable[[], _ChildOut],
) -> _Child:
    """The running child: the adopted early one, or a new process, its pipes on the running loop."""
    if adopt is None:
        adopt = subprocess.Popen(  # as proxy/servers/early.py starts it: the same pipes either way
            [params.command, *params.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            env=child_environment(params),
            cwd=params.cwd,
            start_new_session=True,
            umask=user_umask(),  # not the proxy's private 077: files the server makes are the user's
        )
    try:
        return await _adopt(adopt, out)
    except BaseException:  # cancelled before it was ours: it must not outlive us
        early.kill(adopt)
        raise


def child_environment(params: ChildCommand) -> dict[str, str]:
    """The whole environment a child gets: the SDK's inherited few, then the server's own (one
    definition, shared with the early start and ``policy check``, so adoption compares like with like)."""
    return child_env(params.env or {})


async def stop(process: _Child) -> None:
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


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # the child leads its own group (start_new_session)


async def _exited(process: _Child, timeout: float) -> bool:
    """Poll the return code: ``process.wait()`` also waits for pipe EOF, which a grandchild may hold."""
    deadline = anyio.current_time() + timeout
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(_POLL)
    return True


class _ChildIn:
    """The child's stdin, with the two calls our client and ``stop`` make on it."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._stream = writer  # the name ChildPipe.attach looks for

    async def send(self, data: bytes) -> None:
        self._stream.write(data)
        await self._stream.drain()

    async def aclose(self) -> None:
        self._stream.close()
        with suppress(OSError, ConnectionError):
            await self._stream.wait_closed()


class _ChildOut(asyncio.Protocol):
    """The child's stdout, split into lines as the bytes arrive (proxy/protocol/framing.py, capped at ``limit``).

    Why not a stream read by a task: the fast path's answers (``ChildPipe.offer``) are taken here,
    in the loop's read callback, and written to the host at once; a task would cost another turn
    of the loop per answer. Lines the tap does not take, and every line behind one still waiting
    for the client, queue in order for ``next_line``. A line longer than ``limit`` ends the output
    here: ``refused`` says why, and ``on_refusal`` hears it (the server is then restarted).
    """

    def __init__(self, pipe: ChildPipe | None, limit: int, on_refusal: OnRefusal | None = None) -> None:
        self._pipe = pipe
        self._lines: deque[bytes] = deque()
        self._wake = asyncio.Event()
        self._busy = False  # a line is out with the reader task (it may still be on its way)
        self._ended = False
        self.transport: asyncio.ReadTransport | None = None
        self._paused = False
        self._limit, self._on_refusal = limit, on_refusal
        self._framer = Framer(self._line, limit, self._overflow)
        self.refused: str | None = None

    @classmethod
    def factory(cls, pipe: ChildPipe | None, limit: int, on_refusal: OnRefusal | None) -> Callable[[], _ChildOut]:
        return lambda: cls(pipe, limit, on_refusal)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._framer.feed(data)
        if self._lines:
            self._queued()

    def _line(self, line: bytes, size: int | None) -> None:
        if self._lines or self._busy or self._pipe is None or not self._pipe.offer(line):
            self._lines.append(line)

    def _overflow(self, size: int) -> None:
        """A line with no end within the cap: stop reading; what is pending fails with the reason."""
        self.refused = f"its output had a line over {humane.size(self._limit)} (refused after {humane.size(size)})"
        log.warning("child output refused: a line over %d bytes (%d read)", self._limit, size)
        if self._on_refusal is not None:
            self._on_refusal({"why": "line_too_long", "size": size, "limit": self._limit})
        if self.transport is not None:
            self.transport.close()
        self._end()

    def _queued(self) -> None:
        """Lines wait for the reader task: wake it, and stop reading while too many wait."""
        self._wake.set()
        if len(self._lines) > _QUEUE_HIGH and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self._end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        self._ended = True  # a last line without its newline is dropped, as ever
        self._wake.set()

    async def next_line(self) -> bytes | None:
        """The next queued line (``done`` when handled), or None once stdout has ended."""
        while not self._lines:
            if self._ended:
                return None
            self._wake.clear()
            await self._wake.wait()
        if self._paused and len(self._lines) < _QUEUE_LOW and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        self._busy = True
        return self._lines.popleft()

    def done(self) -> None:
        self._busy = False

    async def aclose(self) -> None:
        if self.transport is not None:
            self.transport.close()


class _Child:
    """A child process on the running loop: its pipes as above, its exit polled from the ``Popen``."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin: _ChildIn, stdout: _ChildOut) -> None:
        self._popen, self.stdin, self.stdout = popen, stdin, stdout
        self.pid = popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()


async def _adopt(popen: subprocess.Popen[bytes], out: Callable[[], _ChildOut]) -> _Child:
    """Put the child's pipes on the running loop (an early child's, or one just started)."""
    assert popen.stdin is not None and popen.stdout is not None
    loop = asyncio.get_running_loop()
    _, stdout = await loop.connect_read_pipe(out, popen.stdout)
    write_transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), popen.stdin
    )
    writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
    return _Child(popen, _ChildIn(writer), stdout)


ChildProcess = _Child
"""A started child (its ``stdin.send``, ``stdout.next_line``/``done``, ``pid``, ``returncode``)."""

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
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import TextIO

import anyio
import anyio.lowlevel
import mcp_types
from anyio.abc import Process
from mcp import StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from gatekeeper.home import user_umask
from gatekeeper.policy.commands import child_env
from gatekeeper.proxy import early

EOF_GRACE = 0.4  # a well-behaved server exits on stdin EOF well within this
TERM_GRACE = 0.4
KILL_REAP = 0.3
STOP_BUDGET = EOF_GRACE + TERM_GRACE + KILL_REAP  # < the hosts' 2 s, with room for the proxy's own exit
_POLL = 0.01
log = logging.getLogger("gatekeeper.proxy")


_PIPE_HIGH_WATER = 1024 * 1024  # bytes buffered toward the child before raw writes step aside


class ChildPipe:
    """Raw access to one life of a child's pipes, beside the SDK client's streams.

    ``write`` puts whole lines on the child's stdin through the same asyncio transport the SDK
    client's messages go through (so lines never interleave); ``tap`` sees each stdout line
    first and keeps the ones it answers for; ``on_end`` hears that stdout closed.
    """

    def __init__(self) -> None:
        self._writer: asyncio.StreamWriter | None = None
        self.alive = False
        self.tap: Callable[[bytes], bool] | None = None
        self.on_end: Callable[[ChildPipe], None] | None = None
        self.on_trouble: Callable[..., None] | None = None  # never called: a pipe's troubles end it (on_end)

    def attach(self, process: Process | _Adopted) -> None:
        writer = getattr(process.stdin, "_stream", None)  # anyio's asyncio stream wrapper
        if isinstance(writer, asyncio.StreamWriter):
            self._writer, self.alive = writer, True

    def write(self, data: bytes) -> bool:
        """False (and nothing written) if the pipe is gone or the child is not keeping up."""
        writer = self._writer
        if not self.alive or writer is None or writer.is_closing():
            return False
        if writer.transport.get_write_buffer_size() > _PIPE_HIGH_WATER:
            return False
        writer.write(data)
        return True

    def send(self, ours: str, data: bytes, headers: dict[str, str]) -> bool:
        """One raw request (the ``Carrier`` protocol of proxy/carrier.py): a line; no headers on a pipe."""
        return self.write(data + b"\n")

    def cancel(self, ours: str, data: bytes, headers: dict[str, str]) -> None:
        self.write(data + b"\n")  # a late answer to it is dropped (FastPath.child_line)

    def ended(self) -> None:
        self.alive = False
        if self.on_end is not None:
            self.on_end(self)

    def offer(self, line: bytes) -> bool:
        """True if the tap took the line; a failing tap leaves it to the SDK client."""
        tap = self.tap
        if tap is None:
            return False
        try:
            return tap(line)
        except Exception:
            log.exception("fast path failed on a child's line; leaving it to the SDK client")
            return False


@asynccontextmanager
async def child_stdio(
    params: StdioServerParameters,
    errlog: TextIO,
    pipe: ChildPipe | None = None,
    adopt: subprocess.Popen[bytes] | None = None,
) -> AsyncIterator[TransportStreams]:
    """Spawn the server (or ``adopt`` the one proxy/early.py started with the same parameters),
    bridge its pipes to the session's streams, and always end it on exit."""
    process = await _start(params, errlog, adopt)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    if pipe is not None:
        pipe.attach(process)

    async def stdout_reader() -> None:
        assert process.stdout is not None
        try:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError, OSError):
                async with read_writer:
                    buffer = b""
                    async for chunk in process.stdout:
                        lines = (buffer + chunk).split(b"\n")
                        buffer = lines.pop()
                        for line in lines:
                            if pipe is not None and pipe.offer(line.rstrip(b"\r")):
                                continue
                            await read_writer.send(_parse(line.decode("utf-8", "replace")))
        finally:
            if pipe is not None:
                pipe.ended()

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


async def _start(
    params: StdioServerParameters, errlog: TextIO, adopt: subprocess.Popen[bytes] | None
) -> Process | _Adopted:
    """The running child: the adopted early one, or a new process."""
    if adopt is not None:
        try:
            return await _adopt(adopt)
        except BaseException:  # cancelled before it was ours: it must not outlive us
            early.kill(adopt)
            raise
    return await anyio.open_process(
        [params.command, *params.args],
        env=child_environment(params),
        stderr=errlog,
        cwd=params.cwd,
        start_new_session=True,
        umask=user_umask(),  # not the proxy's private 077: files the server makes are the user's
    )


def child_environment(params: StdioServerParameters) -> dict[str, str]:
    """The whole environment a child gets: the SDK's inherited few, then the server's own (one
    definition, shared with the early start and ``policy check``, so adoption compares like with like)."""
    return child_env(params.env or {})


def _parse(line: str) -> SessionMessage | Exception:
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # junk on the child's stdout: the session logs it and goes on
        return exc


async def stop(process: Process | _Adopted) -> None:
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


async def _exited(process: Process | _Adopted, timeout: float) -> bool:
    """Poll the return code: ``process.wait()`` also waits for pipe EOF, which a grandchild may hold."""
    deadline = anyio.current_time() + timeout
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(_POLL)
    return True


class _AdoptedStdin:
    """The adopted child's stdin, with the two calls child_stdio and ``stop`` make on anyio's."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._stream = writer  # the name ChildPipe.attach looks for, as on anyio's wrapper

    async def send(self, data: bytes) -> None:
        self._stream.write(data)
        await self._stream.drain()

    async def aclose(self) -> None:
        self._stream.close()
        with suppress(OSError, ConnectionError):
            await self._stream.wait_closed()


class _AdoptedStdout:
    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.BaseTransport) -> None:
        self._reader, self._transport = reader, transport

    def __aiter__(self) -> _AdoptedStdout:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self._reader.read(65536)
        if not chunk:
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        self._transport.close()


class _Adopted:
    """A child spawned early (proxy/early.py), shaped like the anyio ``Process`` the rest expects."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin: _AdoptedStdin, stdout: _AdoptedStdout) -> None:
        self._popen, self.stdin, self.stdout = popen, stdin, stdout
        self.pid = popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()


async def _adopt(popen: subprocess.Popen[bytes]) -> _Adopted:
    """Put the early child's pipes on the running loop, as asyncio's own subprocess streams."""
    assert popen.stdin is not None and popen.stdout is not None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**20, loop=loop)
    read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), popen.stdout)
    write_transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), popen.stdin
    )
    writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
    return _Adopted(popen, _AdoptedStdin(writer), _AdoptedStdout(reader, read_transport))

"""Two plain stdio relays with no MCP in them: the floor a proxy's per-call cost is measured against.

``fastpath_bench.py`` runs each as a process between the client and a server, exactly where a proxy
sits. Standard library only, and never imported by another module, so its start-up time and
resident memory are what a bare Python relay costs.

    python bench/relay.py poll|selectors|asyncio|uvloop -- COMMAND [ARGS...]

- ``poll``: one thread, ``selectors`` (epoll/poll) on stdin and the child's stdout, bytes copied
  with ``os.read``/``os.write`` as they arrive (no framing at all).
- ``selectors``: the same loop, but framed: each chunk is split into JSON-RPC lines and each whole
  line written on its own (what a proxy on a bare selectors loop does at the least).
- ``asyncio``: asyncio streams, one JSON-RPC line at a time in each direction (what a proxy built
  on an event loop does at the least, before any parsing).
- ``uvloop``: the ``asyncio`` relay on uvloop's event loop (libuv), if uvloop is installed.
- ``uvloop-protocol``: uvloop, asyncio ``Protocol`` callbacks on both pipes (no streams, no tasks):
  each chunk split into lines in the read callback and each whole line handed to the other pipe's
  ``transport.write`` at once. This is how the proxy's fast path carries bytes (proxy/host/stdio.py,
  proxy/servers/stdio/process.py), so it is the floor of the proxy's design: what is left above it is the proxy's
  own Python per message.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import subprocess
import sys

CHUNK = 1 << 16


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def poll_relay(argv: list[str]) -> int:
    """Copy bytes both ways until the child closes its stdout; the child's exit status."""
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    to_child, from_child = child.stdin.fileno(), child.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ, to_child)
    sel.register(from_child, selectors.EVENT_READ, 1)
    while True:
        for key, _ in sel.select():
            data = os.read(key.fd, CHUNK)
            if data:
                _write_all(key.data, data)
            elif key.fd == 0:  # the client hung up: let the child see EOF and finish
                sel.unregister(0)
                child.stdin.close()
            else:
                return child.wait()


def selectors_relay(argv: list[str]) -> int:
    """Like ``poll_relay``, but line by line: partial lines wait in a buffer per direction."""
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    to_child, from_child = child.stdin.fileno(), child.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ, (to_child, bytearray()))
    sel.register(from_child, selectors.EVENT_READ, (1, bytearray()))
    while True:
        for key, _ in sel.select():
            target, buffer = key.data
            data = os.read(key.fd, CHUNK)
            if data:
                buffer += data
                start = 0
                while (end := buffer.find(b"\n", start)) >= 0:
                    _write_all(target, bytes(buffer[start : end + 1]))
                    start = end + 1
                del buffer[:start]
            elif key.fd == 0:
                sel.unregister(0)
                child.stdin.close()
            else:
                return child.wait()


async def _pump(reader: asyncio.StreamReader, write: asyncio.StreamWriter | None) -> None:
    """Lines from ``reader`` to ``write`` (the child's stdin) or, when None, to our stdout."""
    while line := await reader.readline():
        if write is not None:
            write.write(line)
            await write.drain()
        else:
            _write_all(1, line)  # stdout: a blocking pipe write of one line
    if write is not None:
        write.close()


async def asyncio_relay(argv: list[str]) -> int:
    """Relay line by line with asyncio streams until the child closes its stdout."""
    loop = asyncio.get_running_loop()
    child = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 24
    )
    assert child.stdin is not None and child.stdout is not None
    stdin = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    up = asyncio.ensure_future(_pump(stdin, child.stdin))
    await _pump(child.stdout, None)
    up.cancel()
    return await child.wait()


class _Lines(asyncio.Protocol):
    """One pipe's bytes, split into whole lines, each written to ``target`` in the read callback."""

    def __init__(self, target: asyncio.WriteTransport, done: asyncio.Future[None] | None = None) -> None:
        self.target = target
        self._buffer = bytearray()
        self._done = done

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        start = 0
        write = self.target.write
        while (end := buffer.find(b"\n", start)) >= 0:
            write(bytes(buffer[start : end + 1]))
            start = end + 1
        del buffer[:start]

    def eof_received(self) -> bool:
        if self._done is None:
            self.target.close()  # the client hung up: let the child see EOF and finish
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)


async def protocol_relay(argv: list[str]) -> int:
    """Relay line by line with Protocol callbacks on both pipes until the child closes its stdout."""
    loop = asyncio.get_running_loop()
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    done: asyncio.Future[None] = loop.create_future()
    to_child, _ = await loop.connect_write_pipe(asyncio.Protocol, child.stdin)
    to_host, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(1, "wb", closefd=False))
    await loop.connect_read_pipe(lambda: _Lines(to_child), os.fdopen(0, "rb", closefd=False))
    await loop.connect_read_pipe(lambda: _Lines(to_host, done), child.stdout)
    await done
    return child.wait()


def main(argv: list[str]) -> int:
    kinds = ("poll", "selectors", "asyncio", "uvloop", "uvloop-protocol")
    if len(argv) < 3 or argv[0] not in kinds or argv[1] != "--":
        print(f"usage: relay.py {'|'.join(kinds)} -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    if argv[0] == "poll":
        return poll_relay(argv[2:])
    if argv[0] == "selectors":
        return selectors_relay(argv[2:])
    if argv[0].startswith("uvloop"):
        import uvloop

        relay = protocol_relay if argv[0] == "uvloop-protocol" else asyncio_relay
        return uvloop.run(relay(argv[2:]))
    return asyncio.run(asyncio_relay(argv[2:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

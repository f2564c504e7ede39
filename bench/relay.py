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


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in ("poll", "selectors", "asyncio", "uvloop") or argv[1] != "--":
        print("usage: relay.py poll|selectors|asyncio|uvloop -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    if argv[0] == "poll":
        return poll_relay(argv[2:])
    if argv[0] == "selectors":
        return selectors_relay(argv[2:])
    if argv[0] == "uvloop":
        import uvloop

        return uvloop.run(asyncio_relay(argv[2:]))
    return asyncio.run(asyncio_relay(argv[2:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

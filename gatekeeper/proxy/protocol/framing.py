"""Lines from a pipe, none held past a cap: the one splitter for the host's stdin and a child's stdout.

Both ends are untrusted. A line waits in a buffer until its newline arrives, so a peer that never
sends one would make the proxy hold everything it writes. Once the start of a line passes ``limit``
bytes the buffer is let go, whichever side it is:

- the host (proxy/host/stdio.py) gets an answer: the line's first ``SCAN_BYTES`` are kept to recover
  its id, the rest is skipped up to its newline, and it is handed on with its full size, refused;
- a child (proxy/servers/stdio/process.py) is cut off: ``over`` hears the size, and nothing more is read from it
  (its pending calls fail, the refusal is recorded and the child restarted: proxy/servers/downstream.py).

The usual read is one whole line, handed on without touching the buffer. Lines lose a final ``\\r``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from gatekeeper.proxy.protocol.limits import LINE_FACTOR, SCAN_BYTES

CHILD_LINE_BYTES: Final = 16 * 1024 * 1024
"""A server's line may be this large, whatever the policy says (raised by its rules' ``max_bytes``)."""
Emit = Callable[[bytes, "int | None"], None]
"""Takes each line; the size is set only for an over-long host line (then the line is its start)."""


def child_line_limit(max_bytes: list[int]) -> int:
    """The largest line a server may write: room for reading back any file its rules let a proposal
    write (escaped as JSON, as the host's cap allows: ``host/parse.line_limit``), and no more."""
    return max([CHILD_LINE_BYTES, *(LINE_FACTOR * m for m in max_bytes)])


class Framer:
    """Splits bytes into lines for ``emit``; past ``limit`` skips (host) or stops, telling ``over`` (child)."""

    __slots__ = ("_buffer", "_emit", "_limit", "_over", "_skipped", "_skipping", "stopped")

    def __init__(self, emit: Emit, limit: int, over: Callable[[int], None] | None = None) -> None:
        self._emit, self._limit, self._over = emit, limit, over
        self._buffer = bytearray()
        self._skipping: bytearray | None = None  # the start of an over-long line being skipped
        self._skipped = 0
        self.stopped = False  # a child's over-long line: nothing more is taken

    def feed(self, data: bytes) -> None:
        """The bytes of one read: every line they end goes to ``emit``, in order."""
        if self.stopped:
            return
        if self._skipping is not None:
            end = data.find(b"\n")
            if end < 0:
                self._skipped += len(data)
                return
            self._skipped += len(data[:end].rstrip(b"\r"))
            self._emit(bytes(self._skipping), self._skipped)
            self._skipping = None
            data = data[end + 1 :]
        buffer = self._buffer
        if not buffer and data and data.find(b"\n") == len(data) - 1:
            self._emit(data[:-1].rstrip(b"\r"), None)  # one whole line (the usual): no buffer copies
            return
        buffer += data
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            line = bytes(buffer[start:end])
            start = end + 1
            self._emit(line.rstrip(b"\r"), None)
            if self.stopped:
                return
        del buffer[:start]
        if len(buffer) > self._limit + 1:  # no line ending within the cap
            self._overflow()

    def _overflow(self) -> None:
        buffer = self._buffer
        if self._over is not None:
            size = len(buffer)
            self.stopped = True
            buffer.clear()
            self._over(size)
            return
        self._skipping = bytearray(buffer[:SCAN_BYTES])
        self._skipped = len(buffer)
        buffer.clear()

    def finish(self) -> None:
        """The end of input: a last line without its newline is handed on too (the host's)."""
        if self._skipping is not None:
            self._emit(bytes(self._skipping), self._skipped)
        elif self._buffer and not self.stopped:
            self._emit(bytes(self._buffer).rstrip(b"\r"), None)
        self._skipping = None
        self._buffer.clear()

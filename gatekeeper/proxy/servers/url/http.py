"""Kept-alive HTTP/1.1 connections for the fast path's POSTs to a url server: bytes out, messages back.

On httpx2 an allowed call cost the proxy ~1.5 ms of CPU (request and response models, the connection
pool's locks, h11's events, two writes per request, an anyio task and cancel scope per call), more
than the server's own work. This does only what one allowed call needs: the request written in one
send on an idle connection to the address checked at start (TLS verifying the URL's host, with the
connection's own context), and the answer parsed as it arrives (a Content-Length or chunked body; a
JSON body whole, an event stream event by event, each message to the caller at once). Anything else
(another status, another content type) comes back whole as (status, headers, body) for the carrier
to judge exactly as the httpx2 path would (proxy/servers/url/carrier.py). No compression is asked for.

A connection is used for one exchange at a time. There is no idle one when every connection is busy
(or none is open yet); the carrier then sends that call over httpx2 and ``warm`` opens another here.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Protocol, cast

log = logging.getLogger("gatekeeper.proxy.fast")

MAX_IDLE = 8  # kept-alive connections at most: more concurrent calls than this share httpx2's pool
_HEAD_LIMIT = 64 * 1024  # status line and headers


class Exchange(Protocol):
    """What one request's answer is told, in order: its head, then messages or the whole, then the end."""

    def head(self, status: int, headers: dict[str, str]) -> str:
        """``json`` or ``sse`` to get messages as they arrive, ``whole`` for the body at the end."""
        ...

    def message(self, data: bytes) -> None: ...

    def whole(self, status: int, headers: list[tuple[str, str]], body: bytes | None) -> None:
        """The answer, ``body`` None when it was over the limit (and was not kept)."""
        ...

    def failed(self, what: str, fresh: bool) -> None:
        """The connection broke (``what`` names how); ``fresh``: before any byte of the answer came back."""
        ...

    def ended(self, over_limit: bool) -> None:
        """The body is complete (or was cut at the limit); nothing more comes for this request."""
        ...


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection and the response parser of the exchange on it."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self._buf = bytearray()
        self._state = "idle"  # idle, head, length, chunk-size, chunk, chunk-end, trailer, close
        self._left = 0
        self._kind = "whole"
        self._status = 0
        self._headers: list[tuple[str, str]] = []
        self._body = bytearray()
        self._total = 0
        self._keep = True
        self._got = False
        self._sse = bytearray()
        self._event: list[bytes] = []
        self._event_type = b""

    # -- asyncio.Protocol --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.pool.forget(self)
        exchange, self.exchange = self.exchange, None
        if exchange is None:
            return
        if self._state == "close":  # the body ran to the end of the connection
            self._finish(exchange)
        else:
            what = f"{type(exc).__name__}: {exc}" if exc else "the server closed the connection"
            exchange.failed(what, not self._got)

    def data_received(self, data: bytes) -> None:
        if self.exchange is None:
            self.abort()  # bytes nobody asked for: the connection cannot be trusted any more
            return
        self._got = True
        self._buf += data
        try:
            self._parse()
        except _Broken as exc:
            exchange, self.exchange = self.exchange, None
            self.abort()
            if exchange is not None:
                exchange.failed(str(exc), False)

    # -- the exchange ------------------------------------------------------------------------------

    def start(self, exchange: Exchange, request: bytes) -> None:
        assert self.transport is not None
        self.exchange, self._state, self._got, self._total = exchange, "head", False, 0
        self._body.clear()
        self._sse.clear()
        self._event.clear()
        self._event_type = b""
        self.transport.write(request)

    def abort(self) -> None:
        """Drop the connection now (a cancelled, timed-out or broken exchange); its exchange hears nothing."""
        self.exchange = None
        self.pool.forget(self)
        if self.transport is not None:
            self.transport.abort()

    def _parse(self) -> None:
        while self.exchange is not None:
            state = self._state
            if state == "head":
                if not self._head():
                    return
            elif state == "length":
                take = min(self._left, len(self._buf))
                self._feed(bytes(self._buf[:take]))
                del self._buf[:take]
                self._left -= take
                if self._left:
                    return
                self._done()
            elif state == "close":
                self._feed(bytes(self._buf))
                self._buf.clear()
                return
            elif not self._chunked():
                return

    def _head(self) -> bool:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > _HEAD_LIMIT:
                raise _Broken("the answer's headers are over 64 KiB")
            return False
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        del self._buf[: end + 4]
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise _Broken(f"not an HTTP/1.1 answer: {lines[0][:80]!r}")
        status = int(parts[1])
        if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            return True
        headers = [(k.strip().lower(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:])]
        named = dict(headers)
        self._status, self._headers = status, headers
        self._keep = parts[0] == "HTTP/1.1" and named.get("connection", "").lower() != "close"
        assert self.exchange is not None
        self._kind = self.exchange.head(status, named)
        if "chunked" in named.get("transfer-encoding", "").lower():
            self._state = "chunk-size"
        elif "content-length" in named or status in (204, 304):
            length = named.get("content-length", "0")
            if not length.isdigit():
                raise _Broken(f"a bad Content-Length: {length[:40]!r}")
            self._state, self._left = "length", int(length)
            if not self._left:
                self._done()
        else:
            self._state, self._keep = "close", False
        return True

    def _chunked(self) -> bool:
        """One step of a chunked body; False when more bytes are needed."""
        if self._state == "chunk":
            take = min(self._left, len(self._buf))
            if take:
                self._feed(bytes(self._buf[:take]))
                del self._buf[:take]
                self._left -= take
            if self._left:
                return False
            self._state = "chunk-end"
            return True
        end = self._buf.find(b"\r\n")
        if end < 0:
            if len(self._buf) > _HEAD_LIMIT:
                raise _Broken("a chunk header is over 64 KiB")
            return False
        line = bytes(self._buf[:end])
        del self._buf[: end + 2]
        if self._state == "chunk-end":
            if line:
                raise _Broken("a chunk does not end with CRLF")
            self._state = "chunk-size"
        elif self._state == "chunk-size":
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _Broken(f"a bad chunk size: {line[:40]!r}") from None
            self._state, self._left = ("chunk", size) if size else ("trailer", 0)
        elif not line:  # the trailer's end
            self._done()
        return True

    def _feed(self, data: bytes) -> None:
        self._total += len(data)
        if self._total > self.pool.limit:
            exchange, self.exchange = self.exchange, None
            self.abort()
            if exchange is not None:
                if self._kind == "whole":
                    exchange.whole(self._status, self._headers, None)
                exchange.ended(True)
            return
        if self._kind == "sse":
            self._events(data)
        else:
            self._body += data

    def _events(self, data: bytes) -> None:
        """Server-sent events: each ``message`` event with data goes to the exchange as it completes."""
        self._sse += data
        while self.exchange is not None:
            end = self._sse.find(b"\n")
            if end < 0:
                return
            line = bytes(self._sse[:end]).rstrip(b"\r")
            del self._sse[: end + 1]
            if not line:
                data = b"\n".join(self._event)
                if data and self._event_type in (b"", b"message"):  # else a priming event, or one only logged
                    self.exchange.message(data)
                self._event.clear()
                self._event_type = b""
                continue
            field, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if field == b"data":
                self._event.append(value)
            elif field == b"event":
                self._event_type = value

    def _done(self) -> None:
        exchange = self.exchange
        self.exchange, self._state = None, "idle"
        if exchange is not None:
            self._finish(exchange)
        if self._keep and not self._buf and self.transport is not None and not self.transport.is_closing():
            self.pool.release(self)
        else:
            self.abort()

    def _finish(self, exchange: Exchange) -> None:
        if self._kind == "json":
            exchange.message(bytes(self._body))
        elif self._kind == "whole":
            exchange.whole(self._status, self._headers, bytes(self._body))
        exchange.ended(False)


class _Broken(Exception):
    """The answer is not HTTP as this parser reads it: the connection is dropped."""


class Pool:
    """The kept-alive connections to one server address; ``idle`` hands one out, ``release`` takes it back."""

    def __init__(
        self, addresses: tuple[str, ...], port: int, context: ssl.SSLContext | None, host: str, limit: int
    ) -> None:
        self.addresses, self.port, self.context, self.host, self.limit = addresses, port, context, host, limit
        self._idle: list[Connection] = []
        self._open: set[Connection] = set()
        self._opening: asyncio.Task[None] | None = None
        self.closed = False

    def idle(self) -> Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.transport is not None and not conn.transport.is_closing():
                return conn
        return None

    def release(self, conn: Connection) -> None:
        if not self.closed and conn in self._open:
            self._idle.append(conn)

    def forget(self, conn: Connection) -> None:
        self._open.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)

    def warm(self) -> None:
        """Open one more connection in the background (one at a time, up to ``MAX_IDLE``)."""
        if self.closed or len(self._open) >= MAX_IDLE or (self._opening is not None and not self._opening.done()):
            return
        self._opening = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        hostname = self.host if self.context is not None else None
        for address in self.addresses:
            try:
                _, conn = await asyncio.wait_for(
                    loop.create_connection(
                        lambda: Connection(self), address, self.port, ssl=self.context, server_hostname=hostname
                    ),
                    10,
                )
            except (TimeoutError, OSError, ssl.SSLError) as exc:
                log.info("a kept-alive connection to %s port %s failed: %s", address, self.port, exc)
                continue
            if self.closed:
                conn.abort()
                return
            self._open.add(conn)
            self._idle.append(conn)
            return

    def close(self) -> None:
        self.closed = True
        if self._opening is not None:
            self._opening.cancel()
        for conn in list(self._open):
            conn.abort()
        self._idle.clear()


def request_head(target: str, headers: dict[str, str], length: int) -> bytes | None:
    """A POST's head, or None when a header would not be one ASCII line (httpx2 then says what is wrong)."""
    lines = [f"POST {target} HTTP/1.1"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\0" in value:
            return None
        lines.append(f"{name}: {value}")
    lines.append(f"content-length: {length}")
    try:
        return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")
    except UnicodeEncodeError:
        return None  # httpx2 says what is wrong with it

"""The fast path's own HTTP/1.1 connections (proxy/servers/url/http.py) against real sockets: a server here writes
each answer in the pieces a test chooses (one byte at a time, or split inside a chunk size, an event or a
CRLF), and the exchange sees the same messages whatever the pieces; a connection is kept for the next
request only when its answer ended cleanly; an answer over the limit, one cut short, or none at all is
reported as such. Over TLS the connection goes to the pinned address and checks the URL's host name."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.proxy.servers.url.http import Pool, request_head
from tests.test_remote_pinning import pki, tls_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts) + b"0\r\n\r\n"


EVENTS = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" + chunked(
    b": a comment\nevent: ping\ndata: x\n\n",  # not a message event
    b"id: 1\ndata:\n\n",  # a priming event: a message without data
    b'event: message\r\ndata: {"method":"x",\r\ndata: "n":1}\r\n\r\n',  # CRLF lines, two data lines
    b'data: {"id":"gatekeeper-fast-1"}\n',
    b"\n",  # the event ends in the next chunk
)
JSON = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"id":"j1"}'


class Recorder:
    """An exchange that writes down what it is told."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []
        self.done = asyncio.Event()

    def head(self, status: int, headers: dict[str, str]) -> str:
        self.seen.append(("head", status))
        kind = headers.get("content-type", "")
        return "sse" if status == 200 and "event-stream" in kind else "json" if status == 200 else "whole"

    def message(self, data: bytes) -> None:
        self.seen.append(("message", data))

    def whole(self, status: int, headers: list[tuple[str, str]], body: bytes | None) -> None:
        self.seen.append(("whole", status, body))

    def failed(self, what: str, fresh: bool) -> None:
        self.seen.append(("failed", fresh))
        self.done.set()

    def ended(self, over_limit: bool) -> None:
        self.seen.append(("ended", over_limit))
        self.done.set()


CUT = b"<then the server closes the connection>"


class Scripted:
    """A server that answers the n-th request with ``answers[n]``, in pieces of ``step`` bytes; None: close
    at once; an answer ending in ``CUT``: close right after it."""

    def __init__(self, answers: list[bytes | None], step: int) -> None:
        self.answers, self.step, self.requests, self.connections = answers, step, [], 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                self.requests.append(head + await reader.readexactly(length))
                answer = self.answers.pop(0)
                if answer is None:
                    break
                cut = answer.endswith(CUT)
                answer = answer.removesuffix(CUT)
                for at in range(0, len(answer), self.step):
                    writer.write(answer[at : at + self.step])
                    await writer.drain()
                    await asyncio.sleep(0)
                if cut:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def pool_for(server: Scripted, limit: int = 1 << 20) -> AsyncIterator[Pool]:
    listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    pool = Pool(("127.0.0.1",), port, None, "127.0.0.1", limit)
    try:
        yield pool
    finally:
        pool.close()
        listening.close()


async def opened(pool: Pool) -> Any:
    for _ in range(500):
        conn = pool.idle()
        if conn is not None:
            return conn
        pool.warm()
        await asyncio.sleep(0.01)
    raise AssertionError("no connection opened")


async def exchange(pool: Pool, body: bytes = b'{"id":1}') -> Recorder:
    conn = await opened(pool)
    head = request_head("/mcp", {"host": "x", "content-type": "application/json"}, len(body))
    assert head is not None
    recorder = Recorder()
    conn.start(recorder, head + body)
    await asyncio.wait_for(recorder.done.wait(), 10)
    return recorder


@pytest.mark.parametrize("step", [1, 3, 7, 64, 4096])
async def test_events_and_json_come_out_the_same_whatever_the_pieces(step: int) -> None:
    server = Scripted([EVENTS, JSON], step)
    async for pool in pool_for(server):
        first = await exchange(pool)
        second = await exchange(pool)
    assert first.seen == [
        ("head", 200),
        ("message", b'{"method":"x",\n"n":1}'),
        ("message", b'{"id":"gatekeeper-fast-1"}'),
        ("ended", False),
    ]
    assert second.seen == [("head", 200), ("message", b'{"id":"j1"}'), ("ended", False)]
    assert server.connections == 1  # kept alive between the two
    assert server.requests[0].startswith(b"POST /mcp HTTP/1.1\r\nhost: x\r\n") and server.requests[0].endswith(
        b'content-length: 8\r\n\r\n{"id":1}'
    )


async def test_another_status_comes_back_whole() -> None:
    redirect = b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://elsewhere/mcp\r\nContent-Length: 0\r\n\r\n"
    page = b"HTTP/1.1 500 Oops\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n<h1>\r\n0\r\n\r\n"
    server = Scripted([redirect, page], 5)
    async for pool in pool_for(server):
        moved, failed = await exchange(pool), await exchange(pool)
    assert moved.seen == [("head", 307), ("whole", 307, b""), ("ended", False)]
    assert failed.seen == [("head", 500), ("whole", 500, b"<h1>"), ("ended", False)]


async def test_an_answer_over_the_limit_is_cut_and_its_connection_dropped() -> None:
    body = b'{"id":"' + b"x" * 5000 + b'"}'
    huge = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    server = Scripted([huge, JSON], 1024)
    async for pool in pool_for(server, limit=4096):
        cut = await exchange(pool)
        after = await exchange(pool)
    assert cut.seen == [("head", 200), ("ended", True)]
    assert after.seen[-1] == ("ended", False) and server.connections == 2


async def test_a_connection_closed_before_or_during_the_answer_is_a_failure() -> None:
    server = Scripted([None, JSON[:-4] + CUT], 64)
    async for pool in pool_for(server):
        nothing = await exchange(pool)
        half = await exchange(pool)
    assert nothing.seen == [("failed", True)]  # fresh: the carrier sends it again over httpx2
    assert half.seen == [("head", 200), ("failed", False)]


async def test_a_header_that_is_not_one_line_is_never_written() -> None:
    assert request_head("/mcp", {"authorization": "Bearer x\r\nX-Evil: 1"}, 0) is None
    assert request_head("/mcp", {"authorization": "Bearer é"}, 0) is None
    assert request_head("/mcp", {"a": "b"}, 2) == b"POST /mcp HTTP/1.1\r\na: b\r\ncontent-length: 2\r\n\r\n"


async def test_tls_goes_to_the_pinned_address_and_checks_the_url_host(
    tls_server: tuple[int, list[str | None]],  # noqa: F811
    pki: Path,  # noqa: F811
) -> None:
    port, seen = tls_server
    verify = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    pool = Pool(("127.0.0.1",), port, verify, "notes.example", 1 << 20)
    try:
        recorder = await exchange(pool)
    finally:
        pool.close()
    assert recorder.seen == [("head", 200), ("message", b"ok"), ("ended", False)] and seen == ["notes.example"]
    wrong = Pool(("127.0.0.1",), port, verify, "other.example", 1 << 20)
    try:
        wrong.warm()
        await asyncio.sleep(0.5)
        assert wrong.idle() is None  # the certificate is not for that name: no connection
    finally:
        wrong.close()

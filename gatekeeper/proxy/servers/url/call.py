"""One fast-path request on a kept-alive connection of our own (proxy/servers/url/http.py), as ``HttpCarrier`` sees it.

It turns what the connection reads into what the httpx2 path (``HttpCarrier._answered``) makes of
the same answer: each message to the tap or the SDK client, the same errors in the same words, the
policy's timeout as one timer instead of a task and a cancel scope. An answer that is neither 200
JSON nor 200 events is judged by the httpx2 path's own code (``HttpCarrier.judge``). A connection
that closes before any byte of the answer (the server dropped it while it was idle, or the server is
gone) sends the request over httpx2 instead, as a browser retries on a fresh connection; that one
then gives the httpx2 path's answer, a connection error included.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from mcp import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, PARSE_ERROR

from gatekeeper.proxy.servers.carrier import TIMEOUT, Trouble

if TYPE_CHECKING:
    from gatekeeper.proxy.servers.url.carrier import HttpCarrier
    from gatekeeper.proxy.servers.url.http import Connection

ANSWERED, UNANSWERED = object(), object()  # a message's outcome: the call's answer, or one before it
DRAIN = 0.5  # seconds an event stream may go on after the response before the connection is dropped


class RawCall:
    """The request ``ours`` on ``conn``: ``rawhttp.Exchange`` for the connection, outcomes for the carrier."""

    def __init__(self, carrier: HttpCarrier, conn: Connection, ours: str, data: bytes, headers: dict[str, str]):
        self.carrier, self.link, self.ours, self.data, self.headers = carrier, conn, ours, data, headers
        self.kind = ""
        self.answered = self.done = self.body_done = False
        self._loop = asyncio.get_running_loop()
        self._timer = self._loop.call_later(carrier.timeout, self._timed_out)

    # -- rawhttp.Exchange --------------------------------------------------------------------------

    def head(self, status: int, headers: dict[str, str]) -> str:
        kind = headers.get("content-type", "").lower()
        if status == 200 and kind.startswith("application/json"):
            self.kind = "json"
        elif status == 200 and kind.startswith("text/event-stream"):
            self.kind = "sse"
        else:
            self.kind = "whole"
        return self.kind

    def message(self, data: bytes) -> None:
        if self.done or self.answered:
            return  # after the response, an event stream's messages are dropped (as the SDK transport drops them)
        failed = "Failed to parse JSON response" if self.kind == "json" else "Failed to parse SSE message"
        outcome = self.carrier.take(self.ours, data, failed)
        if isinstance(outcome, SessionMessage):
            self.carrier.to_client(outcome)
        elif outcome is ANSWERED:
            self.answered = True
            self._timer.cancel()
            self.carrier.forget(self.ours)
            if self.kind == "sse" and not self.body_done:
                self._timer = self._loop.call_later(DRAIN, self._drop_connection)
        elif outcome is not UNANSWERED:
            if self.kind == "sse":
                self._drop_connection()  # the rest of the stream is not read: the connection cannot be reused
            self.settled(outcome)

    def whole(self, status: int, headers: list[tuple[str, str]], body: bytes | None) -> None:
        if not self.done:
            self.carrier.spawn(self.carrier.judge(self, status, headers, body))

    def failed(self, what: str, fresh: bool) -> None:
        self.body_done = True  # the connection is gone: nothing of it to drop any more
        if self.done or self.answered:
            self._timer.cancel()
            return
        if fresh:  # nothing came back: the httpx2 path sends it, on a connection of its own
            self._finish()
            self.carrier.resend(self.ours, self.data, self.headers)
        elif self.kind == "json":
            self.settled(MCPError(PARSE_ERROR, f"Failed to parse JSON response: reading the answer failed ({what})"))
        elif self.kind == "sse":
            self.settled(MCPError(CONNECTION_CLOSED, f"SSE stream failed: reading the answer failed ({what})"))
        else:
            self.carrier.broken(self, what)

    def ended(self, over_limit: bool) -> None:
        self.body_done = True
        if over_limit and not self.answered and self.kind in ("json", "sse"):
            what = f"the answer is over {self.carrier.limit // (1024 * 1024)} MB; refused"
            if self.kind == "json":
                self.settled(MCPError(PARSE_ERROR, f"Failed to parse JSON response: {what}"))
            else:
                self.settled(MCPError(CONNECTION_CLOSED, f"SSE stream failed: {what}"))
        elif self.answered:
            self._timer.cancel()
            self.done = True
        elif self.kind == "sse":
            self.settled(MCPError(CONNECTION_CLOSED, "SSE stream ended without a response"))
        # json that was not the answer: it waits for the timeout, as on the httpx2 path; whole: being judged

    # -- outcomes ----------------------------------------------------------------------------------

    def settled(self, outcome: object) -> None:
        """What the answer came to: an error or ``RESEND``/``TIMEOUT`` is reported; ``UNANSWERED`` waits on."""
        if self.done or outcome is UNANSWERED:  # UNANSWERED: a judged answer that was not the response
            return
        self._finish()
        if isinstance(outcome, MCPError | str):
            self.carrier.report(self.ours, outcome)

    def drop(self) -> None:
        """Cancelled by the host (2026: the POST is aborted), or the connection to the server ends."""
        self._finish()
        self._drop_connection()

    def _finish(self) -> None:
        self.done = True
        self._timer.cancel()
        self.carrier.forget(self.ours)

    def _timed_out(self) -> None:
        if self.done:
            return
        self._finish()
        self._drop_connection()
        trouble: Trouble = TIMEOUT
        self.carrier.report(self.ours, trouble)

    def _drop_connection(self) -> None:
        """Abort the connection while it still carries this request's answer (never once it serves another)."""
        if not self.body_done:
            self.body_done = True
            self.link.abort()

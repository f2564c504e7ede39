"""Request guards for a page that must answer only its own browser tab on loopback.

- ``Host`` must be one of the allowed ``host:port`` values: Starlette's TrustedHostMiddleware
  ignores the port, and another app on ``localhost:OTHER`` would otherwise pass (RFC 6265 §8.5:
  cookies are not isolated by port).
- Every unsafe request carries an exact ``Origin`` (scheme, host and port): the request's own
  (its scheme, its allowed Host) or one the policy's ``review.origins`` names.
- ``Sec-Fetch-Site: cross-site`` is refused outright.
- Every response carries the CSP and framing headers from the shared notes, and over https at a
  name other than loopback, HSTS (on ``localhost`` it would pin every other local app of the
  browser, on any port, to https for a year).
Source: shared/notes/files-and-sqlite.md, "The review page". Never decides from ``request.url``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gatekeeper.origins import is_loopback_host
from gatekeeper.store.bounded import cut

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self'; "
        b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    # Not "no-referrer": with it Chromium sends `Origin: null` on this page's own form posts, which
    # the exact-Origin check must refuse. "same-origin" keeps the Origin and still sends no
    # Referer to any other site.
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
HSTS = (b"strict-transport-security", b"max-age=31536000")

Refuse = Callable[[str, dict[str, Any]], Awaitable[None]]


class Guard:
    """Pure ASGI middleware: cheap, and it runs before any route or body parsing."""

    def __init__(self, app: ASGIApp, *, hosts: set[str], origins: set[str], on_refuse: Refuse) -> None:
        self.app, self.hosts, self.origins, self.on_refuse = app, hosts, origins, on_refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        method = scope.get("method", "GET")
        problem = self._problem(method, headers, scope.get("scheme", "http"))
        if problem is not None:
            await self.on_refuse(
                problem,
                {
                    "method": method,
                    "path": scope.get("path", ""),
                    "host": headers.get("host"),
                    "origin": headers.get("origin"),
                    "sec_fetch_site": headers.get("sec-fetch-site"),
                },
            )
            await plain_error(scope, send, 403 if "origin" in problem or "cross-site" in problem else 400, problem)
            return

        added = [*SECURITY_HEADERS, *([HSTS] if wants_hsts(scope, headers) else [])]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [h for h in message["headers"] if h[0].lower() not in dict(added)]
                message["headers"] += added
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _problem(self, method: str, headers: dict[str, str], scheme: str) -> str | None:
        host = headers.get("host", "").lower()
        if host not in self.hosts:
            return f"host {cut(headers.get('host', ''), 80)!r} is not this review page"
        if headers.get("sec-fetch-site") == "cross-site":
            return "cross-site request refused"
        origin = headers.get("origin")
        if method in UNSAFE and origin not in self.origins and origin != f"{scheme}://{host}":
            return f"origin {cut(origin, 80) if origin is not None else None!r} is not allowed to change anything here"
        return None


def wants_hsts(scope: Scope, headers: dict[str, str]) -> bool:
    """HSTS over https (uvicorn's TLS, or a trusted proxy's), except at a loopback name."""
    hostname = urlsplit(f"//{headers.get('host', '')}").hostname or ""
    return scope.get("scheme") == "https" and not is_loopback_host(hostname)


async def plain_error(scope: Scope, send: Send, status: int, message: str, *, close: bool = False) -> None:
    """A small error page (JSON under /api/) with the security headers; ``close`` ends the
    connection after it, so a body the client is still sending is not read."""
    api = scope.get("path", "").startswith("/api/")
    body = (
        json.dumps({"error": message}).encode()
        if api
        else (f"<!doctype html><title>Refused</title><h1>Refused</h1><p>{_escape(message)}</p>").encode()
    )
    content_type = b"application/json" if api else b"text/html; charset=utf-8"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
                *([(b"connection", b"close")] if close else []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")

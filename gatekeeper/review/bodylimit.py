"""A cap on every request body, enforced before anything parses it.

Starlette parses a form only when a route asks for it, and then reads the whole body: a 48 MiB
multipart part posted to ``/login`` without a cookie was read in full (about 420 MiB of memory)
before the log-in code could refuse it. Every form of this page is a few short fields, so:

- ``multipart/*`` is refused with 415 before a byte of the body is read: no route takes files;
- an unsafe request with a body must be ``application/x-www-form-urlencoded`` (415 otherwise);
- a ``Content-Length`` above ``MAX_BODY`` is refused with 413 at once, unread;
- the body itself is read here, counting bytes, chunked bodies included (they have no
  ``Content-Length``), and refused with 413 the moment it passes ``MAX_BODY``; a body within
  the cap is handed to the app unchanged.

Refusals close the connection (so the client's remaining bytes are not read either) and are
recorded through ``on_refuse`` like the guards' refusals.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gatekeeper.review.guards import UNSAFE, Refuse, plain_error

MAX_BODY = 64 * 1024
FORM_TYPE = "application/x-www-form-urlencoded"


class BodyLimit:
    """Pure ASGI middleware; place it inside ``Guard`` and outside the app."""

    def __init__(self, app: ASGIApp, *, on_refuse: Refuse, limit: int = MAX_BODY) -> None:
        self.app, self.on_refuse, self.limit = app, on_refuse, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, list[str]] = {}
        for k, v in scope.get("headers", []):
            headers.setdefault(k.decode("latin-1").lower(), []).append(v.decode("latin-1"))
        method = scope.get("method", "GET")
        content_type = headers.get("content-type", [""])[0].split(";", 1)[0].strip().lower()
        lengths = headers.get("content-length", [])
        chunked = "transfer-encoding" in headers

        if content_type.startswith("multipart/"):
            await self._refuse(scope, send, 415, "file uploads are not accepted here: this page takes small forms only")
            return
        if len(lengths) > 1 or (lengths and not lengths[0].strip().isdigit()):
            await self._refuse(scope, send, 400, "the Content-Length header is missing a number or repeated")
            return
        declared = int(lengths[0]) if lengths else 0
        if declared > self.limit:
            await self._refuse(scope, send, 413, self._too_large(declared))
            return
        if method in UNSAFE and (declared or chunked) and content_type != FORM_TYPE:
            await self._refuse(
                scope, send, 415, f"this page takes only {FORM_TYPE} forms, not {content_type or 'no content type'!r}"
            )
            return

        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client went away; nothing to answer
            body = message.get("body", b"")
            total += len(body)
            if total > self.limit:
                await self._refuse(scope, send, 413, self._too_large(None))
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _too_large(self, declared: int | None) -> str:
        size = f"{declared} bytes" if declared is not None else "more than that"
        return f"request body too large ({size}); this page accepts at most {self.limit} bytes per request"

    async def _refuse(self, scope: Scope, send: Send, status: int, message: str) -> None:
        await self.on_refuse(message, {"method": scope.get("method", ""), "path": scope.get("path", "")})
        await plain_error(scope, send, status, message, close=True)

"""The page's cookies, by how the request arrived: over https they are ``Secure`` and carry the
``__Host-`` prefix (the browser then refuses one set by a sibling host or over http, or with a
``Domain``); over plain http (loopback) they keep their plain names.

"Over https" is the ASGI scope's scheme: uvicorn's own TLS, or ``X-Forwarded-Proto`` from a
trusted proxy (``forwarded.Forwarded`` set it; from anyone else the header was dropped).
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response


def is_https(request: Request) -> bool:
    return request.scope.get("scheme") == "https"


def name(request: Request, base: str) -> str:
    """The cookie's name for this request: ``__Host-<base>`` over https, ``<base>`` otherwise."""
    return f"__Host-{base}" if is_https(request) else base


def read(request: Request, base: str) -> str | None:
    return request.cookies.get(name(request, base))


def put(response: Response, request: Request, base: str, value: str, max_age: int) -> None:
    """HttpOnly, SameSite=Strict, Path=/, no Domain; Secure over https."""
    response.set_cookie(
        name(request, base),
        value,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="strict",
        secure=is_https(request),
    )


def clear(response: Response, request: Request, base: str) -> None:
    """Delete it (with the same attributes: a browser ignores a ``__Host-`` deletion without Secure)."""
    response.delete_cookie(name(request, base), path="/", httponly=True, samesite="strict", secure=is_https(request))

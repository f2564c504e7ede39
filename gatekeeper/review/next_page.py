"""Where a log-in goes next: back to the page that sent the person to log in (the agent's link to
a proposal), and only ever to a page of this app.

An open redirect would let a link that looks like ours send a person who has just logged in to
any site (which could then ask for the password "again"). So ``next`` must be a local path: one
leading slash, not two (``//evil.example`` is another host to a browser), no backslash (browsers
read ``/\\evil`` as ``//evil``), no scheme or host, printable ASCII only (browsers drop tabs and
newlines inside URLs, so ``/\\t/evil`` would become ``//evil``). Anything else means the queue.
Design source: OWASP's Unvalidated Redirects cheat sheet; Django's ``url_has_allowed_host_and_scheme``.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from fastapi import Request

HOME = "/"
MAX_LENGTH = 2000
_NOT_AFTER_LOGIN = ("/login", "/logout", "/api/")  # a loop, or JSON a person cannot read


def safe(value: str | None) -> str | None:
    """``value`` if it is a path on this app a log-in may end at, else None."""
    if not value or len(value) > MAX_LENGTH or not value.startswith("/") or value.startswith("//"):
        return None
    if any(not 0x21 <= ord(ch) <= 0x7E or ch == "\\" for ch in value):
        return None
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or parts.path.startswith(_NOT_AFTER_LOGIN):
        return None
    return value


def target(value: str | None) -> str:
    """Where a log-in ends: ``value`` when it is safe, else the queue."""
    return safe(value) or HOME


def login_url(request: Request) -> str:
    """The log-in page for a person refused a page: it brings them back to that page afterwards
    (only for reads: a form post cannot be replayed by a redirect)."""
    if request.method != "GET":
        return "/login"
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    came_from = safe(here)
    if came_from is None or came_from == HOME:
        return "/login"
    return f"/login?next={quote(came_from, safe='/')}"

"""Passkeys need the review page at its relying party's name: ``localhost`` on this machine
(WebAuthn refuses an IP address as relying-party id), or a team's public name (``review_url``).

The page still answers on ``127.0.0.1`` (password sessions keep working there); where a passkey
is needed, it sends the person to the same path at the passkeys' origin instead of failing in
the browser's dialog with a message nobody can act on.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import HTMLResponse

from gatekeeper.review.state import ReviewState
from gatekeeper.store.reviews import Session


def localhost_origin(state: ReviewState) -> str:
    """The origin passkeys are made for (``http://localhost:PORT``, or the public ``review_url``'s)."""
    return state.rules.rp.origins[0] if state.rules.rp is not None else ""


def on_localhost(request: Request, state: ReviewState) -> bool:
    """Whether the browser asked for this page by the passkeys' name (the Host header: the guard
    has already checked it is one of this page's, and taken a trusted proxy's X-Forwarded-Host)."""
    rp_id = state.rules.rp.rp_id if state.rules.rp is not None else "localhost"
    return urlsplit(f"//{request.headers.get('host', '')}").hostname == rp_id


def localhost_link(request: Request, state: ReviewState) -> str:
    """This very page at the localhost origin."""
    query = f"?{request.url.query}" if request.url.query else ""
    return f"{localhost_origin(state)}{request.url.path}{query}"


def has_passkey(state: ReviewState, reviewer: str) -> bool:
    return bool(state.store.passkeys(reviewer))


def move_to_localhost(request: Request, state: ReviewState, session: Session | None) -> HTMLResponse | None:
    """For a passkey reviewer on 127.0.0.1: a page that says to open the localhost link; else None."""
    if on_localhost(request, state) or session is None or not has_passkey(state, session.reviewer):
        return None
    return wrong_host_page(request, state, session)


def wrong_host_page(request: Request, state: ReviewState, session: Session | None) -> HTMLResponse:
    return state.page(request, "localhost.html", 409, session=session, link=localhost_link(request, state))


def not_localhost_message(state: ReviewState) -> str:
    """What a script (or the page's JavaScript) is told when a passkey is asked for off localhost."""
    return (
        "Passkeys work only at the review page's own name, not at the address this page was opened at. "
        f"Open {localhost_origin(state)}/ and log in there."
    )

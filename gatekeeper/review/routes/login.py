"""Log-in (password or one-time link) and log-out: the only routes that need no session."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from gatekeeper.review import auth, cookies, next_page, where
from gatekeeper.review.access import State, unsafe
from gatekeeper.review.errors import ReviewError
from gatekeeper.review.state import ReviewState
from gatekeeper.store.events import LOGIN_FAILED, REQUEST_REFUSED
from gatekeeper.store.reviews import Session

MAX_FAILURES, FAILURE_WINDOW = 5, timedelta(minutes=15)

router = APIRouter()


@router.get("/login")
def login_form(
    request: Request, state: State, error: str | None = None, after: Annotated[str, Query(alias="next")] = ""
) -> HTMLResponse:
    return login_page(request, state, error, after)


def login_page(request: Request, state: ReviewState, error: str | None, after: str = "") -> HTMLResponse:
    """The form, with a fresh CSRF token bound to a signed nonce cookie (there is no session yet).
    ``after``: the page to return to once logged in (kept only if it is a local path)."""
    back = next_page.safe(after)
    cookie, token = state.tokens.login_form_cookie(back)
    response = state.page(
        request,
        "login.html",
        401 if error else 200,
        login_csrf=token,
        error=error,
        next_page=back,
        localhost=None if where.on_localhost(request, state) else where.localhost_link(request, state),
    )
    cookies.put(response, request, auth.LOGIN_COOKIE, cookie, max_age=int(auth.LOGIN_FORM_TTL.total_seconds()))
    return response


@router.post("/login")
def login(
    request: Request,
    state: State,
    username: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
    after: Annotated[str, Form(alias="next")] = "",
) -> Response:
    if not state.tokens.login_form_ok(cookies.read(request, auth.LOGIN_COOKIE), csrf_token):
        state.refusals.record(REQUEST_REFUSED, "review", {"why": "log-in form CSRF token missing or wrong"})
        raise ReviewError(403, "The log-in form expired or did not come from this page. Reload it and try again.")
    # Counted before the password is checked, in one transaction: parallel guesses cannot
    # all pass a count that none of them has added to yet.
    attempt = state.reviews.begin_login_attempt(state.tokens.name_key(username), MAX_FAILURES, FAILURE_WINDOW)
    if attempt is None:
        state.refusals.record(LOGIN_FAILED, "review", {"username": state.who(username), "why": "too many attempts"})
        raise ReviewError(429, "Too many log-in attempts for this name. Wait 15 minutes, or use a log-in link.")
    ok = auth.verify_password(state.reviews.password_hash(username), password)
    state.reviews.finish_login_attempt(attempt, ok)
    if not ok:
        # One event per checked password: the throttle bounds them, so they are not coalesced.
        why = {"username": state.who(username), "why": "wrong name or password"}
        state.refusals.record(LOGIN_FAILED, "review", why, coalesce=False)
        return login_page(request, state, "Wrong name or password.", after)
    session = state.reviews.start_session(username, auth.SESSION_TTL, "password")
    return logged_in(request, state, session, after)


def logged_in(request: Request, state: ReviewState, session: Session, after: str | None) -> Response:
    """To the page the log-in started from (a local path only), else the queue, with the session
    cookie set and the log-in form's cookie gone."""
    return with_session(request, state, session, RedirectResponse(next_page.target(after), status_code=303))


def with_session(request: Request, state: ReviewState, session: Session, response: Response) -> Response:
    """``response`` with the session cookie set and the log-in form's cookie gone."""
    ttl = int(auth.SESSION_TTL.total_seconds())
    cookies.put(response, request, auth.SESSION_COOKIE, state.tokens.session_cookie(session.id), max_age=ttl)
    cookies.clear(response, request, auth.LOGIN_COOKIE)
    return response


@router.get("/login/link")
def login_link(
    request: Request, state: State, token: str = "", after: Annotated[str, Query(alias="next")] = ""
) -> Response:
    """A one-time link: it ends at ``next``, else where this browser's last log-in form was to return."""
    data = state.tokens.login_link_data(token)
    if data is None:
        state.refusals.record(REQUEST_REFUSED, "review", {"why": "log-in link invalid or expired"})
        raise ReviewError(400, "This log-in link is invalid or older than 10 minutes. Ask for a new one.")
    reviewer, nonce = data
    if not state.reviews.use_nonce(nonce, "login-link"):
        state.refusals.record(REQUEST_REFUSED, "review", {"why": "log-in link reused", "reviewer": reviewer})
        raise ReviewError(400, "This log-in link was already used. Each link works once; ask for a new one.")
    if state.reviews.password_hash(reviewer) is None:
        state.refusals.record(LOGIN_FAILED, "review", {"username": reviewer, "why": "link for a disabled reviewer"})
        raise ReviewError(403, f"Reviewer {reviewer!r} is disabled or unknown.")
    after = after or state.tokens.login_form_next(cookies.read(request, auth.LOGIN_COOKIE)) or ""
    return logged_in(request, state, state.reviews.start_session(reviewer, auth.SESSION_TTL, "link"), after)


@router.post("/logout")
def logout(request: Request, state: State, session: Annotated[Session, Depends(unsafe("logout"))]) -> Response:
    state.reviews.end_session(session)
    response = RedirectResponse("/login", status_code=303)
    cookies.clear(response, request, auth.SESSION_COOKIE)
    return response

"""Enrolling a passkey on a one-time link (``/enrol/<token>``), and logging in with one.

No session is needed for either: the enrolment token in the path is the bearer secret (stored
only as its hash, spent once), and a passkey log-in is bound to the log-in form's CSRF cookie
and to a signed, single-use challenge. Both answer only at the localhost origin (``where``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from gatekeeper.errors import Conflict, NotFound
from gatekeeper.review import auth, cookies, where
from gatekeeper.review.access import State
from gatekeeper.review.errors import ReviewError
from gatekeeper.review.routes.login import with_session
from gatekeeper.review.state import ReviewState
from gatekeeper.store.events import LOGIN_FAILED, REQUEST_REFUSED
from gatekeeper.trust import enrolment
from gatekeeper.trust.approval import ApprovalRefused, Assertion, verify_assertion

router = APIRouter()
LINK_USED = (
    "This enrolment link was already used, has expired, or was never issued. "
    "Ask for a new one: `gatekeeper reviewer enrol NAME` prints it."
)
SIGN_IN_TTL = 300  # seconds a passkey log-in challenge stays good
SIGN_IN_PURPOSE = b"gatekeeper.login.v1"


def relying_party(state: ReviewState) -> Any:
    if state.rules.rp is None:
        raise ReviewError(409, "This review page does not know its own address, so it cannot use passkeys.")
    return state.rules.rp


@router.get("/enrol/{token}")
def enrol_page(request: Request, state: State, token: str) -> HTMLResponse:
    if not where.on_localhost(request, state):
        return where.wrong_host_page(request, state, None)
    reviewer = state.store.enrolment_reviewer(token)
    if reviewer is None:
        state.refusals.record(REQUEST_REFUSED, "review", {"why": "enrolment link used, expired or unknown"})
        raise ReviewError(410, LINK_USED)
    existing = [p.credential_id for p in state.store.passkeys(reviewer)]
    options = enrolment.registration_options(relying_party(state), reviewer, token, existing=existing)
    return state.page(request, "enrol.html", reviewer=reviewer, options=options, token=token, existing=len(existing))


@router.post("/api/enrol/{token}")
def enrol(
    request: Request,
    state: State,
    token: str,
    credential: Annotated[str, Form()] = "",
    label: Annotated[str, Form()] = "",
) -> JSONResponse:
    if not where.on_localhost(request, state):
        raise ReviewError(409, where.not_localhost_message(state))
    if state.store.enrolment_reviewer(token) is None:
        raise ReviewError(410, LINK_USED)
    try:
        new = enrolment.verify_registration(credential, token, relying_party(state))
        event = state.store.redeem_enrolment(token, new, label)
    except (Conflict, NotFound) as exc:
        state.refusals.record(REQUEST_REFUSED, "review", {"why": f"enrolment refused: {exc.message}"})
        raise ReviewError(409, str(exc)) from None
    payload = json.loads(event.payload)
    return JSONResponse({"reviewer": payload["reviewer"], "label": payload["label"]})


# -- log-in with a passkey ---------------------------------------------------------------------


def sign_in_tokens(state: ReviewState) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(state.home.read_key(), salt="gatekeeper.review.passkey-login")


def sign_in_challenge(nonce: str) -> bytes:
    return hashlib.sha256(SIGN_IN_PURPOSE + nonce.encode()).digest()


def login_form_checked(request: Request, state: ReviewState, csrf_token: str) -> None:
    if not where.on_localhost(request, state):
        raise ReviewError(409, where.not_localhost_message(state))
    if not state.tokens.login_form_ok(cookies.read(request, auth.LOGIN_COOKIE), csrf_token):
        state.refusals.record(REQUEST_REFUSED, "review", {"why": "log-in form CSRF token missing or wrong"})
        raise ReviewError(403, "The log-in form expired or did not come from this page. Reload it and try again.")


@router.post("/api/login/passkey/options")
def passkey_login_options(request: Request, state: State, csrf_token: Annotated[str, Form()] = "") -> JSONResponse:
    """A fresh sign-in challenge (any of this page's passkeys may answer: the browser lists them)."""
    login_form_checked(request, state, csrf_token)
    nonce = secrets.token_urlsafe(24)
    options = enrolment.authentication_options(relying_party(state), sign_in_challenge(nonce), [])
    return JSONResponse({"options": json.loads(options), "ticket": sign_in_tokens(state).dumps(nonce)})


@router.post("/api/login/passkey")
def passkey_login(
    request: Request,
    state: State,
    csrf_token: Annotated[str, Form()] = "",
    ticket: Annotated[str, Form()] = "",
    credential: Annotated[str, Form()] = "",
) -> Response:
    login_form_checked(request, state, csrf_token)
    try:
        nonce = sign_in_tokens(state).loads(ticket, max_age=SIGN_IN_TTL)
    except BadSignature:
        raise ReviewError(409, "The passkey log-in took too long or was tampered with. Try again.") from None
    try:
        assertion = Assertion.from_credential(json.loads(credential))
    except (ValueError, AttributeError):
        raise ReviewError(400, "The passkey log-in did not carry a passkey's answer. Try again.") from None
    except ApprovalRefused as exc:
        raise ReviewError(400, str(exc)) from None
    passkey = state.store.passkey(assertion.credential_id)
    refused = None
    if passkey is None or passkey.removed_at is not None:
        refused = "This passkey is not enrolled here, or was removed. Log in with your password, or enrol it again."
    else:
        try:
            count = verify_assertion(
                assertion,
                challenge=sign_in_challenge(str(nonce)),
                passkey=passkey,
                rp=relying_party(state),
                current_count=passkey.sign_count,
            )
        except ApprovalRefused as exc:
            refused = f"The passkey log-in was refused: {exc}"
        else:
            if not state.reviews.use_nonce(str(nonce), "passkey-login"):
                refused = "This passkey log-in was already used. Try again."
            elif not state.store.bump_sign_count(passkey.credential_id, count):
                refused = "The passkey's signature counter did not increase: it may have been cloned."
            elif state.reviews.password_hash(passkey.reviewer) is None:
                refused = f"Reviewer {passkey.reviewer!r} is disabled."
    if refused is not None or passkey is None:
        state.refusals.record(LOGIN_FAILED, "review", {"how": "passkey", "why": refused}, coalesce=False)
        raise ReviewError(403, refused or "")
    session = state.reviews.start_session(passkey.reviewer, auth.SESSION_TTL, "passkey")
    return with_session(request, state, session, JSONResponse({"reviewer": passkey.reviewer}))

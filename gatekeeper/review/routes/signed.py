"""Approving with a passkey: one proposal from its page, or several from the queue with one assertion.

Two steps, both behind ``access.unsafe`` (session + CSRF): ``.../challenge`` asks the store for a
single-use nonce bound to the reviewer and to the digests of exactly these proposals, and answers
the options for ``navigator.credentials.get`` (user verification required); ``.../approve`` posts
the assertion back and the store checks it in the transaction that records the decisions. A
stolen cookie gets as far as a challenge, never a signature. Answers are JSON (the page's script
shows the error as it is), so the routes live under ``/api/``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import JSONResponse

from gatekeeper.errors import Conflict, InvalidInput, NotFound
from gatekeeper.review import where
from gatekeeper.review.access import State, unsafe
from gatekeeper.review.errors import ReviewError
from gatekeeper.review.state import ReviewState
from gatekeeper.store.decisions import MAX_BATCH, Shown
from gatekeeper.store.events import CHALLENGE_REFUSED
from gatekeeper.store.passkeys import MAX_OPEN_CHALLENGES, TooManyChallenges
from gatekeeper.store.queries import Reader
from gatekeeper.store.reviews import Session
from gatekeeper.trust import enrolment
from gatekeeper.trust.approval import ApprovalRefused, Assertion, Proof

router = APIRouter(prefix="/api")

NO_PASSKEY = (
    "You have no passkey here, so approve on the proposal page with your password. "
    "To approve with a passkey, enrol one: `gatekeeper reviewer enrol NAME` prints a link."
)


@contextmanager
def answered() -> Iterator[None]:
    """The store's refusals as HTTP: the message says what went wrong and what to do."""
    try:
        yield
    except NotFound as exc:
        raise ReviewError(404, str(exc)) from None
    except (ApprovalRefused, Conflict) as exc:
        raise ReviewError(409, str(exc)) from None
    except InvalidInput as exc:
        raise ReviewError(400, str(exc)) from None


def challenge_for(
    request: Request, state: ReviewState, session: Session, ids: list[str], *, batch: bool = False
) -> JSONResponse:
    if not where.on_localhost(request, state):
        raise ReviewError(409, where.not_localhost_message(state))
    credentials = [p.credential_id for p in state.store.passkeys(session.reviewer)]
    if not credentials:
        raise ReviewError(409, NO_PASSKEY)
    if state.rules.rp is None:
        raise ReviewError(409, "This review page does not know its own address, so it cannot use passkeys.")
    with answered():
        try:
            ch = state.store.issue_challenge(session.reviewer, ids, batch=batch)
        except TooManyChallenges as exc:  # counted, not stored each time (store/refusals.py)
            details = {"reviewer": exc.reviewer, "open": exc.open, "limit": MAX_OPEN_CHALLENGES}
            state.refusals.record(CHALLENGE_REFUSED, session.reviewer, details)
            raise ReviewError(429, str(exc)) from None
    options = enrolment.authentication_options(state.rules.rp, ch.challenge, credentials)
    body = {"options": json.loads(options), "nonce": ch.nonce, "digests": list(ch.digests), "expires_at": ch.expires_at}
    return JSONResponse(body)


def proof_of(nonce: str, digests: str, credential: str) -> Proof:
    """The posted assertion as the store takes it; a malformed one is a clear refusal."""
    try:
        listed, obj = json.loads(digests), json.loads(credential)
    except ValueError:
        listed = obj = None
    if not isinstance(listed, list) or not all(isinstance(d, str) for d in listed) or not isinstance(obj, dict):
        raise ReviewError(400, "The approval did not carry a passkey's answer. Reload the page and approve again.")
    with answered():
        return Proof(nonce, Assertion.from_credential(obj), 0, tuple(listed))


@router.post("/proposals/{proposal_id}/challenge")
def challenge(
    request: Request,
    state: State,
    session: Annotated[Session, Depends(unsafe("challenge {proposal_id}"))],
    proposal_id: str,
) -> JSONResponse:
    return challenge_for(request, state, session, [proposal_id])


@router.post("/proposals/{proposal_id}/approve")
def approve(
    state: State,
    session: Annotated[Session, Depends(unsafe("approve {proposal_id}"))],
    proposal_id: str,
    sha256: Annotated[str, Form()] = "",
    path: Annotated[str, Form()] = "",
    mode: Annotated[str, Form()] = "",
    base_sha256: Annotated[str, Form()] = "",
    nonce: Annotated[str, Form()] = "",
    digests: Annotated[str, Form()] = "[]",
    credential: Annotated[str, Form()] = "{}",
) -> JSONResponse:
    proof = proof_of(nonce, digests, credential)
    with answered():
        state.store.decide(
            proposal_id,
            verdict="approved",
            reviewer=session.reviewer,
            sha256=sha256,
            path=path,
            mode=mode or None,
            base_sha256=base_sha256 or None,
            proof=proof,
            rules=state.rules,
        )
    return JSONResponse({"approved": [proposal_id]})


@router.post("/challenge")
def batch_challenge(
    request: Request,
    state: State,
    session: Annotated[Session, Depends(unsafe("challenge selected"))],
    ids: Annotated[list[str], Form()],
) -> JSONResponse:
    if not 0 < len(ids) <= MAX_BATCH:
        raise ReviewError(400, f"Select between 1 and {MAX_BATCH} proposals to approve at once.")
    return challenge_for(request, state, session, ids, batch=True)


@router.post("/approve-selected")
def approve_selected(
    state: State,
    session: Annotated[Session, Depends(unsafe("approve selected"))],
    items: Annotated[str, Form()] = "[]",
    nonce: Annotated[str, Form()] = "",
    digests: Annotated[str, Form()] = "[]",
    credential: Annotated[str, Form()] = "{}",
) -> JSONResponse:
    """``items``: what the queue showed for each selected proposal (id, sha256, path, mode), in
    the challenge's order."""
    proof = proof_of(nonce, digests, credential)
    with state.reader() as reader:  # one connection for the whole selection (on PostgreSQL each costs a backend)
        shown = [shown_of(reader, item) for item in listed_items(items)]
    with answered():
        state.store.approve_batch(shown, reviewer=session.reviewer, proof=proof, rules=state.rules)
    return JSONResponse({"approved": [s.proposal_id for s in shown]})


def listed_items(items: str) -> list[dict[str, Any]]:
    try:
        listed = json.loads(items)
    except ValueError:
        listed = None
    if not isinstance(listed, list) or not all(isinstance(i, dict) for i in listed):
        raise ReviewError(400, "The selection did not say which proposals to approve. Reload the queue and try again.")
    return listed


def shown_of(reader: Reader, item: dict[str, Any]) -> Shown:
    """One selected row as the queue showed it; the base (not shown there) is the stored one,
    which the signed digest covers anyway."""
    pid = str(item.get("id", ""))
    stored = reader.proposal(pid)
    if stored is None:
        raise ReviewError(404, f"No proposal {pid}.")
    return Shown(
        pid,
        str(item.get("sha256", "")),
        str(item.get("path", "")),
        str(item.get("mode") or "") or None,
        stored["base_sha256"],
    )

"""Approve and reject: the page's only writes, each behind ``access.unsafe`` (session + CSRF)."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse, Response

from gatekeeper.errors import Conflict, InvalidInput, NotFound
from gatekeeper.review.access import State, unsafe
from gatekeeper.review.errors import ReviewError
from gatekeeper.review.proposals import detail
from gatekeeper.review.routes.login import FAILURE_WINDOW, MAX_FAILURES
from gatekeeper.review.routes.pages import proposal_page
from gatekeeper.review.state import ReviewState
from gatekeeper.store.proofs import WRONG_PASSWORD, PasswordProof
from gatekeeper.store.reviews import Session
from gatekeeper.trust.approval import ApprovalRefused

router = APIRouter()


@router.post("/proposals/{proposal_id}/approve")
def approve(
    request: Request,
    state: State,
    session: Annotated[Session, Depends(unsafe("approve {proposal_id}"))],
    proposal_id: str,
    sha256: Annotated[str, Form()] = "",
    path: Annotated[str, Form()] = "",
    mode: Annotated[str, Form()] = "",
    base_sha256: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
) -> Response:
    # The password typed again (step-up): without it (or a passkey assertion) the store refuses.
    fields: dict[str, Any] = dict(verdict="approved", sha256=sha256, path=path, rules=state.rules)
    if not password:
        return decide(state, proposal_id, session, proof=None, **fields, **bound(mode, base_sha256))
    # A stolen cookie must not buy unlimited guesses: step-up checks count against the reviewer's
    # log-in throttle, before the check, as log-ins do.
    name_key = state.tokens.name_key(session.reviewer)
    attempt = state.reviews.begin_login_attempt(name_key, MAX_FAILURES, FAILURE_WINDOW)
    if attempt is None:
        return proposal_page(request, state, session, proposal_id, 429, LOCKED)
    answer: Response | ApprovalRefused | None = None
    try:
        proof = PasswordProof(password)
        answer = try_decide(state, proposal_id, session, proof=proof, **fields, **bound(mode, base_sha256))
    finally:  # only a password found wrong counts; a refusal before the check (already decided) does not
        wrong = isinstance(answer, ApprovalRefused) and answer.reason == WRONG_PASSWORD
        state.reviews.finish_login_attempt(attempt, not wrong)
    if not isinstance(answer, ApprovalRefused):
        return answer
    # The form again, the reason beside it; for a wrong password, the tries left from the throttle's count.
    said = str(answer)
    if answer.reason == WRONG_PASSWORD:
        said = tries_left(state.reviews.attempts_left(name_key, MAX_FAILURES, FAILURE_WINDOW), session.reviewer)
    return proposal_page(request, state, session, proposal_id, 409, said)


LOCKED = "Too many wrong passwords for this reviewer. Wait 15 minutes, then approve again."


def tries_left(left: int, reviewer: str) -> str:
    """What a wrong step-up password leaves: the tries before the throttle locks the name for 15 minutes
    (the same count as log-ins: both are the reviewer's password)."""
    minutes = int(FAILURE_WINDOW.total_seconds() // 60)
    if left == 0:
        return (
            f"Wrong password: nothing was approved. That was the last try: approving and logging in as "
            f"{reviewer} with the password are locked for {minutes} minutes."
        )
    tries = "1 try" if left == 1 else f"{left} tries"
    return (
        f"Wrong password: nothing was approved. Type it again: {tries} left before approving and logging in "
        f"as {reviewer} with the password are locked for {minutes} minutes."
    )


@router.post("/proposals/{proposal_id}/reject")
def reject(
    state: State,
    session: Annotated[Session, Depends(unsafe("reject {proposal_id}"))],
    proposal_id: str,
    reason: Annotated[str, Form()] = "",
    sha256: Annotated[str, Form()] = "",
    path: Annotated[str, Form()] = "",
    mode: Annotated[str, Form()] = "",
    base_sha256: Annotated[str, Form()] = "",
) -> Response:
    if not sha256:  # a form without them (an older page): the rejection names what is stored
        shown = detail(state, proposal_id)
        sha256, path, mode, base_sha256 = shown["sha256"], shown["path"], shown["mode"], shown["base_sha256"] or ""
    return decide(
        state,
        proposal_id,
        session,
        verdict="rejected",
        reason=reason,
        rules=state.rules,  # scopes: a reviewer rejects only what they may decide
        sha256=sha256,
        path=path,
        **bound(mode, base_sha256),
    )


class Bound(TypedDict):
    mode: str | None
    base_sha256: str | None


def bound(mode: str, base_sha256: str) -> Bound:
    """The posted mode and base as ``Store.decide`` takes them: an empty field is "not posted"."""
    return {"mode": mode or None, "base_sha256": base_sha256 or None}


def decide(state: ReviewState, proposal_id: str, session: Session, **kwargs: Any) -> Response:
    """The store decides (and refuses with an event); this only translates its answer to HTTP."""
    answer = try_decide(state, proposal_id, session, **kwargs)
    if isinstance(answer, ApprovalRefused):
        raise ReviewError(409, str(answer))
    return answer


def try_decide(state: ReviewState, proposal_id: str, session: Session, **kwargs: Any) -> Response | ApprovalRefused:
    """As ``decide``, but a proof that did not hold is returned, not raised: the step-up form shows it."""
    try:
        state.store.decide(proposal_id, reviewer=session.reviewer, **kwargs)
    except NotFound as exc:
        raise ReviewError(404, str(exc)) from None
    except ApprovalRefused as exc:
        return exc
    except Conflict as exc:
        raise ReviewError(409, str(exc)) from None
    except InvalidInput as exc:
        raise ReviewError(400, str(exc)) from None
    return RedirectResponse(f"/proposals/{proposal_id}", status_code=303)

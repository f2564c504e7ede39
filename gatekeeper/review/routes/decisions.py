"""Approve and reject: the page's only writes, each behind ``access.unsafe`` (session + CSRF)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form
from fastapi.responses import RedirectResponse, Response

from gatekeeper.errors import Conflict, InvalidInput, NotFound
from gatekeeper.review.access import State, unsafe
from gatekeeper.review.errors import ReviewError
from gatekeeper.review.proposals import detail
from gatekeeper.review.state import ReviewState
from gatekeeper.store.proofs import PasswordProof
from gatekeeper.store.reviews import Session

router = APIRouter()


@router.post("/proposals/{proposal_id}/approve")
def approve(
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
    proof = PasswordProof(password) if password else None
    return decide(
        state,
        proposal_id,
        session,
        verdict="approved",
        sha256=sha256,
        path=path,
        proof=proof,
        rules=state.rules,
        **bound(mode, base_sha256),
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
        sha256=sha256,
        path=path,
        **bound(mode, base_sha256),
    )


def bound(mode: str, base_sha256: str) -> dict[str, str | None]:
    """The posted mode and base as ``Store.decide`` takes them: an empty field is "not posted"."""
    return {"mode": mode or None, "base_sha256": base_sha256 or None}


def decide(state: ReviewState, proposal_id: str, session: Session, **kwargs: Any) -> Response:
    """The store decides (and refuses with an event); this only translates its answer to HTTP."""
    try:
        state.store.decide(proposal_id, reviewer=session.reviewer, key=state.home.read_key(), **kwargs)
    except NotFound as exc:
        raise ReviewError(404, str(exc)) from None
    except Conflict as exc:
        raise ReviewError(409, str(exc)) from None
    except InvalidInput as exc:
        raise ReviewError(400, str(exc)) from None
    return RedirectResponse(f"/proposals/{proposal_id}", status_code=303)

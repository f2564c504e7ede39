"""Who may do what on the review page, as FastAPI dependencies.

- ``reviewer_session``: reads (pages and ``/api/``) need a live session of an enabled reviewer;
  without one a person is sent to the log-in page and a script gets 401.
- ``unsafe(action)``: every change needs that session *and* its CSRF token (a synchronizer
  token bound to the session); a refusal is an event naming the action. The Host, Origin and
  Sec-Fetch-Site checks run earlier, in ``guards.Guard``, before any body is parsed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Form, Request

from gatekeeper.review import next_page
from gatekeeper.review.errors import ReviewError
from gatekeeper.review.state import ReviewState, review_state
from gatekeeper.store.events import REQUEST_REFUSED
from gatekeeper.store.reviews import Session

State = Annotated[ReviewState, Depends(review_state)]


def reviewer_session(request: Request, state: State) -> Session:
    """Dependency for reads: the reviewer's session, or off to the log-in page (which then brings
    the person back here: the agent's link to a proposal lands on that proposal)."""
    session = state.session_of(request)
    if session is None:
        raise ReviewError(401, "log in first", people_go_to=next_page.login_url(request))
    return session


def unsafe(action: str) -> Callable[..., Session]:
    """Dependency for a change; ``action`` names it in events and may use path parameters
    (``"approve {proposal_id}"``)."""

    def checked(request: Request, state: State, csrf_token: Annotated[str, Form()] = "") -> Session:
        named = action.format(**request.path_params)
        session = state.session_of(request)
        if session is None:
            state.refusals.record(REQUEST_REFUSED, "review", {"why": "no valid session", "action": named})
            raise ReviewError(401, "You are not logged in (or your session ended). Log in and try again.")
        if not state.tokens.csrf_ok(session.id, csrf_token):
            state.refusals.record(
                REQUEST_REFUSED,
                f"reviewer:{session.reviewer}",
                {"why": "missing or wrong CSRF token", "action": named},
            )
            raise ReviewError(403, "This form is stale or did not come from this page. Reload the page and try again.")
        return session

    return checked


ReviewerSession = Annotated[Session, Depends(reviewer_session)]

"""One error type for the review page and one handler that answers it: an HTML page for people,
JSON ``{"error": ...}`` under ``/api/`` for scripts (as datasette's ``handle_exception`` does).

Routes and dependencies raise ``ReviewError``; Starlette's own HTTP errors (404, 405) and any
unexpected exception are turned into one before they are answered, so every error looks alike
and no traceback reaches a user.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from gatekeeper.review.state import review_state
from gatekeeper.store.backends import DatabaseUnreachable

log = logging.getLogger("gatekeeper.review")
UNEXPECTED = "Something went wrong on the review page; see its log."


class ReviewError(Exception):
    """A refusal with its HTTP status and a message that says what went wrong and what to do.

    ``people_go_to``: a page to send a person to (303) instead of showing the message; scripts
    under ``/api/`` still get the status and the message.
    """

    def __init__(self, status: int, message: str, *, people_go_to: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.people_go_to = status, message, people_go_to


def is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


async def handle_error(request: Request, exc: Exception) -> Response:
    """The one exception handler: whatever was raised, answered as a page or as JSON."""
    error = as_review_error(request, exc)
    if is_api(request):
        return JSONResponse({"error": error.message}, status_code=error.status)
    if error.people_go_to is not None:
        return RedirectResponse(error.people_go_to, status_code=303)
    state = review_state(request)
    session = None if isinstance(exc, DatabaseUnreachable) else state.session_of(request)
    return state.page(request, "error.html", error.status, message=error.message, session=session)


def as_review_error(request: Request, exc: Exception) -> ReviewError:
    if isinstance(exc, ReviewError):
        return exc
    if isinstance(exc, StarletteHTTPException):
        return ReviewError(exc.status_code, str(exc.detail))
    if isinstance(exc, DatabaseUnreachable):  # a team's database server went away: say so, no traceback
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        return ReviewError(
            503,
            f"The review page cannot reach its database ({exc.message}). Reload in a minute to see where "
            "things stand; if it keeps failing, ask whoever runs Gatekeeper to check the database server.",
        )
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return ReviewError(500, UNEXPECTED)


def install(app: FastAPI) -> None:
    """Route every error through ``handle_error`` (``Exception``: Starlette's last resort, which
    answers and then re-raises to the server: a lost database is answered here, as a named kind)."""
    for kind in (ReviewError, StarletteHTTPException, DatabaseUnreachable, Exception):
        app.add_exception_handler(kind, handle_error)

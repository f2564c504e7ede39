"""The review web app (FastAPI). Thin: each route checks who is asking, then calls the store.

Pages are for people (HTML, errors as pages); ``/api/`` is for scripts (JSON, same log-in).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from gatekeeper.errors import Conflict, InvalidInput, NotFound
from gatekeeper.home import Home
from gatekeeper.resources import templates_dir
from gatekeeper.review import auth, queue, render
from gatekeeper.review.bodylimit import BodyLimit
from gatekeeper.review.guards import Guard
from gatekeeper.review.integrity import ChainWatch
from gatekeeper.store.bounded import cut
from gatekeeper.store.events import LOGIN_FAILED, REQUEST_REFUSED
from gatekeeper.store.queries import STATUSES, Reader
from gatekeeper.store.refusals import Refusals
from gatekeeper.store.reviews import Reviews, Session
from gatekeeper.store.store import Store

log = logging.getLogger("gatekeeper.review")
MAX_FAILURES, FAILURE_WINDOW = 5, timedelta(minutes=15)


@dataclass
class Config:
    home: Home
    port: int
    scheme: str = "http"
    extra_hosts: tuple[str, ...] = ()

    @property
    def hosts(self) -> set[str]:
        return {f"127.0.0.1:{self.port}", f"localhost:{self.port}", *(f"{h}:{self.port}" for h in self.extra_hosts)}

    @property
    def origins(self) -> set[str]:
        return {f"{self.scheme}://{h}" for h in self.hosts}


class Page(Exception):
    """An error page (or JSON under /api/) with a status code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def create_app(config: Config) -> FastAPI:
    home = config.home.require()
    store = Store(home.db_path)
    reviews = Reviews(store)
    tokens = auth.Tokens(home.read_key())
    chain = ChainWatch(home.db_path)
    refusals = Refusals(store)
    templates = Jinja2Templates(directory=str(templates_dir()))
    templates.env.filters["marked"] = render.marks  # paths on the page: hidden characters marked
    secure = config.scheme == "https"

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        chain.start()
        flusher = asyncio.create_task(_flush_refusals())
        try:
            yield
        finally:
            flusher.cancel()
            refusals.flush_all()  # a clean stop loses no refusal count
            chain.stop()
            reviews.close()
            store.close()

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.mount("/static", StaticFiles(directory=str(templates_dir() / "static")), name="static")

    async def _flush_refusals() -> None:
        while True:
            await asyncio.sleep(1.0)
            try:
                await asyncio.to_thread(refusals.flush_due)
            except Exception:  # a locked database now is no reason to stop counting
                log.exception("could not flush refusal counters; will retry")

    async def refuse(why: str, details: dict[str, Any]) -> None:
        await asyncio.to_thread(refusals.record, REQUEST_REFUSED, "review", {"why": why, **details})

    def who(typed: str) -> str:
        """A typed log-in name as events may keep it: a reviewer's name, else a keyed tag (an
        unknown "name" may be a password typed into the wrong field)."""
        return cut(typed, 64) if reviews.is_reviewer(typed) else tokens.name_tag(typed)

    # -- helpers ---------------------------------------------------------------------------

    def session_of(request: Request) -> Session | None:
        sid = tokens.session_id(request.cookies.get(auth.SESSION_COOKIE))
        return reviews.session(sid) if sid else None

    def page(request: Request, name: str, code: int = 200, **context: Any) -> HTMLResponse:
        session = context.get("session")
        context.setdefault("csrf", tokens.csrf(session.id) if session else "")
        context["integrity"] = chain.current()
        return templates.TemplateResponse(request, name, context, status_code=code)

    def require_session(request: Request) -> Session:
        session = session_of(request)
        if session is None:
            if request.url.path.startswith("/api/"):
                raise Page(401, "log in first")
            raise Page(303, "/login")
        return session

    def require_unsafe(request: Request, csrf_token: str | None, action: str) -> Session:
        """Unsafe requests: a live session of an enabled reviewer and its CSRF token, or an event."""
        session = session_of(request)
        if session is None:
            refusals.record(REQUEST_REFUSED, "review", {"why": "no valid session", "action": action})
            raise Page(401, "You are not logged in (or your session ended). Log in and try again.")
        if not tokens.csrf_ok(session.id, csrf_token):
            refusals.record(
                REQUEST_REFUSED,
                f"reviewer:{session.reviewer}",
                {"why": "missing or wrong CSRF token", "action": action},
            )
            raise Page(403, "This form is stale or did not come from this page. Reload the page and try again.")
        return session

    def reader() -> Reader:
        return Reader(home.db_path)

    # -- errors ----------------------------------------------------------------------------

    @app.exception_handler(Page)
    async def _page_error(request: Request, exc: Page) -> Response:
        if exc.status == 303:
            return RedirectResponse(exc.message, status_code=303)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.message}, status_code=exc.status)
        return page(request, "error.html", exc.status, message=exc.message, session=session_of(request))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return await _page_error(request, Page(exc.status_code, str(exc.detail)))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return await _page_error(request, Page(500, "Something went wrong on the review page; see its log."))

    # -- log-in ----------------------------------------------------------------------------

    @app.get("/login")
    def login_form(request: Request, error: str | None = None) -> HTMLResponse:
        cookie, token = tokens.login_form_cookie()
        response = page(request, "login.html", 401 if error else 200, login_csrf=token, error=error)
        response.set_cookie(auth.LOGIN_COOKIE, cookie, httponly=True, samesite="strict", secure=secure, max_age=3600)
        return response

    @app.post("/login")
    def login(
        request: Request, username: str = Form(""), password: str = Form(""), csrf_token: str = Form("")
    ) -> Response:
        if not tokens.login_form_ok(request.cookies.get(auth.LOGIN_COOKIE), csrf_token):
            refusals.record(REQUEST_REFUSED, "review", {"why": "log-in form CSRF token missing or wrong"})
            raise Page(403, "The log-in form expired or did not come from this page. Reload it and try again.")
        # Counted before the password is checked, in one transaction: parallel guesses cannot
        # all pass a count that none of them has added to yet.
        attempt = reviews.begin_login_attempt(tokens.name_key(username), MAX_FAILURES, FAILURE_WINDOW)
        if attempt is None:
            refusals.record(LOGIN_FAILED, "review", {"username": who(username), "why": "too many attempts"})
            raise Page(429, "Too many log-in attempts for this name. Wait 15 minutes, or use a log-in link.")
        ok = auth.verify_password(reviews.password_hash(username), password)
        reviews.finish_login_attempt(attempt, ok)
        if not ok:
            # One event per checked password: the throttle bounds them, so they are not coalesced.
            refusals.record(
                LOGIN_FAILED, "review", {"username": who(username), "why": "wrong name or password"}, coalesce=False
            )
            return login_form(request, error="Wrong name or password.")
        session = reviews.start_session(username, auth.SESSION_TTL, "password")
        return _logged_in(session)

    def _logged_in(session: Session) -> Response:
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            auth.SESSION_COOKIE,
            tokens.session_cookie(session.id),
            httponly=True,
            samesite="strict",
            secure=secure,
            max_age=int(auth.SESSION_TTL.total_seconds()),
        )
        response.delete_cookie(auth.LOGIN_COOKIE)
        return response

    @app.get("/login/link")
    def login_link(request: Request, token: str = "") -> Response:
        data = tokens.login_link_data(token)
        if data is None:
            refusals.record(REQUEST_REFUSED, "review", {"why": "log-in link invalid or expired"})
            raise Page(400, "This log-in link is invalid or older than 10 minutes. Ask for a new one.")
        reviewer, nonce = data
        if not reviews.use_nonce(nonce, "login-link"):
            refusals.record(REQUEST_REFUSED, "review", {"why": "log-in link reused", "reviewer": reviewer})
            raise Page(400, "This log-in link was already used. Each link works once; ask for a new one.")
        if reviews.password_hash(reviewer) is None:
            refusals.record(LOGIN_FAILED, "review", {"username": reviewer, "why": "link for a disabled reviewer"})
            raise Page(403, f"Reviewer {reviewer!r} is disabled or unknown.")
        return _logged_in(reviews.start_session(reviewer, auth.SESSION_TTL, "link"))

    @app.post("/logout")
    def logout(request: Request, csrf_token: str = Form("")) -> Response:
        session = require_unsafe(request, csrf_token, "logout")
        reviews.end_session(session)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(auth.SESSION_COOKIE)
        return response

    # -- pages -----------------------------------------------------------------------------

    def _status_filter(status: str | None) -> str | None:
        if status in (None, "", "all"):
            return None
        if status not in STATUSES:
            raise Page(400, f"Unknown status {status!r}; use one of {', '.join(STATUSES)}.")
        return status

    @app.get("/")
    def queue_view(request: Request, status: str = "pending", server: str = "", page_no: int = 1) -> HTMLResponse:
        session = require_session(request)
        chosen = _status_filter(status)
        with reader() as r:
            result = queue.queue_page(r, status=chosen, server=server or None, page=max(1, page_no))
            all_servers = queue.servers(r)
        return page(
            request,
            "queue.html",
            session=session,
            q=result,
            status=status,
            server=server,
            statuses=STATUSES,
            servers=all_servers,
        )

    def _detail(proposal_id: str) -> dict[str, Any]:
        with reader() as r:
            detail = r.proposal(proposal_id)
            if detail is None:
                raise Page(404, f"No proposal {proposal_id}.")
            detail["others"] = queue.other_pending_for_path(r, proposal_id, detail["path"], detail["workspace"])
        return detail

    @app.get("/proposals/{proposal_id}")
    def proposal_view(request: Request, proposal_id: str) -> HTMLResponse:
        session = require_session(request)
        detail = _detail(proposal_id)
        absolute = os.path.join(detail["workspace"], detail["path"])
        return page(
            request,
            "proposal.html",
            session=session,
            p=detail,
            absolute=absolute,
            exists_now=os.path.lexists(absolute),
            content=render.render(detail["content"]),
            arguments=render.render(
                json.dumps(json.loads(detail["arguments"]), indent=2, ensure_ascii=False).encode("utf-8")
            ),
            events=[{**e, "payload": json.loads(e["payload"])} for e in detail["events"]],
        )

    @app.get("/proposals/{proposal_id}/raw")
    def proposal_raw(request: Request, proposal_id: str) -> Response:
        require_session(request)
        detail = _detail(proposal_id)
        return Response(
            detail["content"],
            media_type="application/octet-stream",
            headers={"content-disposition": f'attachment; filename="{proposal_id}.bin"'},
        )

    def _decide(request: Request, proposal_id: str, session: Session, **kwargs: Any) -> Response:
        try:
            store.decide(proposal_id, reviewer=session.reviewer, key=home.read_key(), **kwargs)
        except NotFound as exc:
            raise Page(404, str(exc)) from None
        except (Conflict, InvalidInput) as exc:
            raise Page(409 if isinstance(exc, Conflict) else 400, str(exc)) from None
        return RedirectResponse(f"/proposals/{proposal_id}", status_code=303)

    @app.post("/proposals/{proposal_id}/approve")
    def approve(
        request: Request, proposal_id: str, sha256: str = Form(""), path: str = Form(""), csrf_token: str = Form("")
    ) -> Response:
        session = require_unsafe(request, csrf_token, f"approve {proposal_id}")
        return _decide(request, proposal_id, session, verdict="approved", sha256=sha256, path=path)

    @app.post("/proposals/{proposal_id}/reject")
    def reject(request: Request, proposal_id: str, reason: str = Form(""), csrf_token: str = Form("")) -> Response:
        session = require_unsafe(request, csrf_token, f"reject {proposal_id}")
        detail = _detail(proposal_id)  # a rejection names what was shown, like an approval does
        return _decide(
            request,
            proposal_id,
            session,
            verdict="rejected",
            reason=reason,
            sha256=detail["sha256"],
            path=detail["path"],
        )

    # -- JSON API --------------------------------------------------------------------------

    @app.get("/api/proposals")
    def api_list(request: Request, status: str = "", server: str = "", limit: int = 50) -> JSONResponse:
        require_session(request)
        with reader() as r:
            rows = r.proposals(status=_status_filter(status), server=server or None, limit=max(1, min(limit, 1000)))
        return JSONResponse({"proposals": [row.as_dict() for row in rows]})

    @app.get("/api/proposals/{proposal_id}")
    def api_detail(request: Request, proposal_id: str) -> JSONResponse:
        require_session(request)
        detail = _detail(proposal_id)
        raw: bytes = detail.pop("content")
        detail["content_base64"] = base64.b64encode(raw).decode("ascii")
        detail["arguments"] = json.loads(detail["arguments"])
        for event in detail["events"]:
            event["payload"] = json.loads(event["payload"])
        return JSONResponse(detail)

    @app.get("/api/count")
    def api_count(request: Request) -> JSONResponse:
        require_session(request)
        with reader() as r:
            return JSONResponse({"pending": queue.pending_count(r)})

    # Outermost first: Host/Origin, then the body cap, then FastAPI (which parses forms).
    limited = BodyLimit(app, on_refuse=refuse)
    return Guard(limited, hosts=config.hosts, origins=config.origins, on_refuse=refuse)  # type: ignore[return-value]

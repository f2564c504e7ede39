"""What every route of the review page shares: the store's doors, the signer and the templates.

Built once per app by ``create_app`` and kept on ``app.state.review``; routes reach it through
the ``review_state`` dependency instead of closing over it, so each route module stands alone.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from gatekeeper import humane
from gatekeeper.errors import GatekeeperError
from gatekeeper.home import Home, ensure_keys
from gatekeeper.resources import templates_dir
from gatekeeper.review import auth, change, cookies, render
from gatekeeper.review.integrity import ChainWatch
from gatekeeper.store.bounded import cut
from gatekeeper.store.decisions import ANY
from gatekeeper.store.events import REQUEST_REFUSED
from gatekeeper.store.proofs import ApprovalRules
from gatekeeper.store.queries import Reader
from gatekeeper.store.refusals import Refusals
from gatekeeper.store.reviews import Reviews, Session
from gatekeeper.store.store import Store


@dataclass
class ReviewState:
    """One review page's long-lived parts; ``close`` releases them at shutdown."""

    home: Home
    store: Store
    reviews: Reviews
    tokens: auth.Tokens
    chain: ChainWatch
    refusals: Refusals
    templates: Jinja2Templates
    rules: ApprovalRules = ANY  # what an approval must carry: the page's relying party, approve_with

    @classmethod
    def open(cls, home: Home, *, rules: ApprovalRules = ANY) -> ReviewState:
        ensure_keys(home)  # an older home gets its Ed25519 key on the review page's first start
        if not home.keys.has_private():
            raise GatekeeperError(
                f"{home.path} holds public keys only (a verify-only home, `gatekeeper init --public-keys`): "
                "it can commit and verify, but not approve, so the review page does not start here",
                "run `gatekeeper review` on the machine that holds the private key (the review side)",
            )
        store = home.store()
        templates = Jinja2Templates(directory=str(templates_dir()))
        templates.env.filters["marked"] = render.marks  # paths on the page: hidden characters marked
        templates.env.filters["size_change"] = change.queue_size  # the queue's size column
        # Sizes and times as people read them; the exact value goes in a title (see _text.html's `when`).
        templates.env.filters.update(size=humane.size, ago=humane.ago, local=humane.local, iso=humane.iso)
        return cls(
            home=home,
            store=store,
            reviews=Reviews(store),
            tokens=auth.Tokens(home.read_key()),
            chain=ChainWatch(home.database),
            refusals=Refusals(store),
            templates=templates,
            rules=rules,
        )

    def close(self) -> None:
        self.refusals.flush_all()  # a clean stop loses no refusal count
        self.chain.stop()
        self.reviews.close()
        self.store.close()

    def reader(self) -> Reader:
        return Reader(self.store.backend.database)  # the store's database, resolved once at start

    def session_of(self, request: Request) -> Session | None:
        """The live session the request's cookie names, if any (a bad cookie is "no session")."""
        sid = self.tokens.session_id(cookies.read(request, auth.SESSION_COOKIE))
        return self.reviews.session(sid) if sid else None

    def page(self, request: Request, name: str, code: int = 200, **context: Any) -> HTMLResponse:
        """A template rendered with what every page shows: the CSRF token and the audit footer."""
        session = context.get("session")
        context.setdefault("csrf", self.tokens.csrf(session.id) if session else "")
        context["integrity"] = self.chain.current()
        context.setdefault("rp_id", self.rules.rp.rp_id if self.rules.rp is not None else "localhost")
        context.setdefault("review_origin", self.rules.rp.origins[0] if self.rules.rp is not None else "")
        return self.templates.TemplateResponse(request, name, context, status_code=code)

    def who(self, typed: str) -> str:
        """A typed log-in name as events may keep it: a reviewer's name, else a keyed tag (an
        unknown "name" may be a password typed into the wrong field)."""
        return cut(typed, 64) if self.reviews.is_reviewer(typed) else self.tokens.name_tag(typed)

    async def refuse(self, why: str, details: dict[str, Any]) -> None:
        """The middlewares' refusals (bad Host, Origin, body): an event, off the event loop."""
        await asyncio.to_thread(self.refusals.record, REQUEST_REFUSED, "review", {"why": why, **details})


def review_state(request: Request) -> ReviewState:
    """Dependency: the state of the app that received this request."""
    state: ReviewState = request.app.state.review
    return state

"""The review web app (FastAPI): assembles the routers, the one error handler and the guards.

Pages are for people (HTML, errors as pages); ``/api/`` is for scripts (JSON, same log-in).
Routes live in ``review/routes/``; what they share is ``state.ReviewState`` on ``app.state``;
who may do what is ``access``; errors are ``errors.ReviewError``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from gatekeeper.approval import RelyingParty
from gatekeeper.home import Home
from gatekeeper.resources import templates_dir
from gatekeeper.review import errors
from gatekeeper.review.bodylimit import BodyLimit
from gatekeeper.review.guards import Guard
from gatekeeper.review.routes import api, decisions, enrol, login, pages, signed
from gatekeeper.review.state import ReviewState
from gatekeeper.store.checkpoints import CHECKPOINT_EVERY, append_checkpoint
from gatekeeper.store.proofs import ApprovalRules

if TYPE_CHECKING:
    from gatekeeper.policy import Policy

log = logging.getLogger("gatekeeper.review")
FLUSH_EVERY = 1.0  # seconds between flushes of the refusal counters


@dataclass
class Config:
    home: Home
    port: int
    scheme: str = "http"
    extra_hosts: tuple[str, ...] = ()
    approve_with: str = "any"  # the policy's: 'passkey' refuses password approvals
    policy: Policy | None = None  # reviewers' scopes and rules' approvals (None: no scopes, one approval)

    @property
    def rules(self) -> ApprovalRules:
        """Passkeys are for rp id ``localhost``: the page's own origin with that host."""
        rp = RelyingParty.for_review_url(f"{self.scheme}://localhost:{self.port}")
        return ApprovalRules(rp, self.approve_with, self.policy)

    @property
    def hosts(self) -> set[str]:
        return {f"127.0.0.1:{self.port}", f"localhost:{self.port}", *(f"{h}:{self.port}" for h in self.extra_hosts)}

    @property
    def origins(self) -> set[str]:
        return {f"{self.scheme}://{h}" for h in self.hosts}


def create_app(config: Config) -> Guard:
    """The FastAPI app inside its middlewares. Outermost first: Host/Origin, then the body cap,
    then FastAPI (which parses forms)."""
    state = ReviewState.open(config.home.require(), secure=config.scheme == "https", rules=config.rules)
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.review = state
    app.mount("/static", StaticFiles(directory=str(templates_dir() / "static")), name="static")
    for module in (login, enrol, pages, decisions, signed, api):
        app.include_router(module.router)
    errors.install(app)
    limited = BodyLimit(app, on_refuse=state.refuse)
    return Guard(limited, hosts=config.hosts, origins=config.origins, on_refuse=state.refuse)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The audit footer's checker and the refusal counters' flusher run while the app does."""
    state: ReviewState = app.state.review
    state.chain.start()
    flusher = asyncio.create_task(flush_refusals(state))
    signer = asyncio.create_task(sign_checkpoints(state))
    try:
        yield
    finally:
        flusher.cancel()
        signer.cancel()
        state.close()


async def sign_checkpoints(state: ReviewState) -> None:
    """A signed checkpoint of the chain head at start and every ``CHECKPOINT_EVERY`` seconds."""
    while True:
        try:
            await asyncio.to_thread(append_checkpoint, state.store)
        except Exception:  # a busy database now is no reason to stop signing later
            log.exception("could not sign a checkpoint; will retry")
        await asyncio.sleep(CHECKPOINT_EVERY)


async def flush_refusals(state: ReviewState) -> None:
    while True:
        await asyncio.sleep(FLUSH_EVERY)
        try:
            await asyncio.to_thread(state.refusals.flush_due)
        except Exception:  # a locked database now is no reason to stop counting
            log.exception("could not flush refusal counters; will retry")

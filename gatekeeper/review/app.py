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

from gatekeeper.home import Home
from gatekeeper.origins import host_of, public_origin
from gatekeeper.resources import templates_dir
from gatekeeper.review import errors
from gatekeeper.review.bodylimit import BodyLimit
from gatekeeper.review.forwarded import Forwarded, networks
from gatekeeper.review.guards import Guard
from gatekeeper.review.routes import api, decisions, enrol, login, pages, signed
from gatekeeper.review.state import ReviewState
from gatekeeper.store.checkpoints import CHECKPOINT_EVERY, append_checkpoint
from gatekeeper.store.proofs import ApprovalRules
from gatekeeper.trust.approval import RelyingParty

if TYPE_CHECKING:
    from gatekeeper.policy import Policy

log = logging.getLogger("gatekeeper.review")
FLUSH_EVERY = 1.0  # seconds between flushes of the refusal counters


@dataclass
class Config:
    """What ``gatekeeper review`` serves: where, over what, and to which names."""

    home: Home
    port: int
    scheme: str = "http"  # 'https' when uvicorn itself serves TLS (--tls-cert/--tls-key)
    extra_hosts: tuple[str, ...] = ()  # a non-loopback bind address, answered at this port
    approve_with: str = "any"  # the policy's: 'passkey' refuses password approvals
    policy: Policy | None = None  # reviewers' scopes and rules' approvals (None: no scopes, one approval)
    trusted_proxies: tuple[str, ...] = ()  # peers whose X-Forwarded-* headers are believed (IPs or CIDR)

    @property
    def public_origin(self) -> str | None:
        """The policy's ``review_url`` at a public name (a team's page), else None."""
        return public_origin(self.policy.review_url) if self.policy is not None else None

    @property
    def rules(self) -> ApprovalRules:
        """Passkeys are for the public ``review_url`` when there is one (as the committer reads it),
        else for rp id ``localhost``: the page's own origin with that host."""
        url = self.public_origin or f"{self.scheme}://localhost:{self.port}"
        return ApprovalRules(RelyingParty.for_review_url(url), self.approve_with, self.policy)

    @property
    def hosts(self) -> set[str]:
        """Host headers answered: loopback at this port, the bind address, the public name, the policy's."""
        hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}", *(f"{h}:{self.port}" for h in self.extra_hosts)}
        if self.public_origin is not None:
            hosts.add(host_of(self.public_origin))
        return hosts | set(self.policy.review.hosts if self.policy is not None else ())

    @property
    def origins(self) -> set[str]:
        """Origins allowed to post besides a request's own: this page's loopback names, the public
        origin, the policy's ``review.origins``."""
        local = {f"{self.scheme}://{h}" for h in (f"127.0.0.1:{self.port}", f"localhost:{self.port}")}
        public = {self.public_origin} if self.public_origin is not None else set()
        return local | public | set(self.policy.review.origins if self.policy is not None else ())


def create_app(config: Config) -> Forwarded:
    """The FastAPI app inside its middlewares. Outermost first: a trusted proxy's X-Forwarded-*
    (else dropped), Host/Origin, then the body cap, then FastAPI (which parses forms)."""
    state = ReviewState.open(config.home.require(), rules=config.rules)
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.review = state
    app.mount("/static", StaticFiles(directory=str(templates_dir() / "static")), name="static")
    for module in (login, enrol, pages, decisions, signed, api):
        app.include_router(module.router)
    errors.install(app)
    limited = BodyLimit(app, on_refuse=state.refuse)
    guarded = Guard(limited, hosts=config.hosts, origins=config.origins, on_refuse=state.refuse)
    return Forwarded(guarded, networks(config.trusted_proxies))


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

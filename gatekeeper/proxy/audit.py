"""The proxy's audit trail: events and counted refusals, written off the event loop.

Store calls block on fsync, so each runs in a worker thread. A failure to record is logged and
never becomes the host's problem: the call it describes has already been answered or refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from gatekeeper.store.refusals import Refusals
from gatekeeper.store.store import Store

log = logging.getLogger("gatekeeper.proxy")
T = TypeVar("T")
FLUSH_EVERY = 1.0  # seconds between checks for refusal counters whose window has passed


class Audit:
    """One proxy session's writer of audit events, under its ``proxy:<session>`` actor."""

    def __init__(self, store: Store, actor: str) -> None:
        self.store = store
        self.actor = actor
        # Every refusal the host can provoke (a bad line, a denied tool, a refused proposal) is
        # attacker-sized and repeatable: bounded fields, identical ones counted (store/refusals.py).
        self.refusals = Refusals(store)

    async def db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking store call in a worker thread."""
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))

    async def event(self, kind: str, payload: dict[str, Any], proposal_id: str | None = None) -> None:
        """Append an event of a kind from store/events.py; a failure is logged, not raised."""
        try:
            await self.db(self.store.append_event, kind, self.actor, payload, proposal_id)
        except Exception:
            log.exception("could not record %s event", kind)

    async def refused(self, kind: str, payload: dict[str, Any]) -> None:
        """Record a refusal the host provoked: bounded, and counted if an identical one is open."""
        try:
            await self.db(self.refusals.record, kind, self.actor, payload)
        except Exception:
            log.exception("could not record %s event", kind)

    async def flush_due_forever(self) -> None:
        """Write the counters whose window has passed, about once a second, until cancelled."""
        while True:
            await anyio.sleep(FLUSH_EVERY)
            try:
                await self.db(self.refusals.flush_due)
            except Exception:  # a locked database now is no reason to stop counting
                log.exception("could not flush refusal counters; will retry")

    async def flush_all(self) -> None:
        """Write every open counter now: at shutdown, so a clean stop loses no count. The caller
        bounds the time; each counter is its own transaction, so one cut short is simply not there."""
        try:
            await anyio.to_thread.run_sync(self.refusals.flush_all, abandon_on_cancel=True)
        except Exception:
            log.exception("could not flush refusal counters")

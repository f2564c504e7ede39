"""The proxy's own list-changed events, fanned out to whoever listens (a 2026 host's listen streams).

Why not the SDK's ``InMemorySubscriptionBus``: importing it loads the SDK server, which the proxy's
start-up no longer needs (issue 12). The events are plain names, the list that changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, Literal

import anyio

log = logging.getLogger("gatekeeper.proxy")

Changed = Literal["tools", "resources", "prompts"]
KINDS: Final[tuple[Changed, ...]] = ("tools", "resources", "prompts")


class ListChanges:
    """Synchronous fan-out in subscription order; one raising listener does not starve the rest."""

    def __init__(self) -> None:
        self._listeners: dict[object, Callable[[Changed], None]] = {}

    async def publish(self, what: Changed) -> None:
        for listener in list(self._listeners.values()):
            try:
                listener(what)
            except Exception:  # a listener's trouble is its own
                log.exception("a list-changed listener failed; the others still hear it")
        await anyio.lowlevel.checkpoint()  # a burst of changes lets listen streams drain between them

    def subscribe(self, listener: Callable[[Changed], None]) -> Callable[[], None]:
        """Register ``listener``; the returned callable unsubscribes it (idempotent)."""
        token = object()
        self._listeners[token] = listener
        return lambda: self._listeners.pop(token, None) and None

    def __len__(self) -> int:
        return len(self._listeners)

"""One host request as the proxy's domain sees it: plain values.

The proposing flow (proxy/proposing.py) and the 2026-07-28 hand-off (proxy/handoff.py) need to
know who asked, in which protocol revision, what the host can do, and how to report progress.
The host side (``HostSession.host_call`` in proxy/session.py) builds this once per call, so the
domain does not care what carries the bytes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gatekeeper.proxy.protocol.mcp import MODERN_PROTOCOL_VERSIONS

Progress = Callable[[float, float | None, str | None], Awaitable[None]]


async def _no_progress(progress: float, total: float | None, message: str | None) -> None:
    """A host that gave no progress token hears nothing."""


@dataclass(frozen=True)
class HostCall:
    """A host's request: its revision, the client it declared, its params (the parsed wire object)."""

    protocol_version: str | None
    client_info: dict[str, Any] | None = None  # as declared (initialize or the 2026 envelope); never trusted
    client_capabilities: dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    request_id: str | int | None = None
    report: Progress = _no_progress

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """A ``notifications/progress`` for this request (nothing if the host asked for none)."""
        await self.report(progress, total, message)

    @property
    def modern(self) -> bool:
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    def declared(self, key: str) -> str | None:
        """One string of the declared client info (``name``, ``version``), or None."""
        value = (self.client_info or {}).get(key)
        return value if isinstance(value, str) else None

    def url_elicitation(self) -> bool:
        """Whether the host declared URL-mode elicitation (``elicitation.url``)."""
        elicitation = (self.client_capabilities or {}).get("elicitation")
        return isinstance(elicitation, dict) and elicitation.get("url") is not None

"""The era children are spoken to in: the host's (``--downstream-mode match``, the default).

Why: a child spoken to in another era than the host's costs every fast call an envelope rewrite
and a re-serialised answer (proxy/fast/rewrite.py), and a server on the SDK spends ~15% more CPU per call
in 2026-07-28 than in 2025-11-25 (bench/README.md, session 6). So in ``match`` mode a child is
still spawned at once (proxy/servers/early.py: its own start overlaps ours), but the handshake with it
waits for the host's first request, which fixes the host's era for good (the era
lock, proxy/host/era.py): ``initialize``, or any request without the 2026 envelope, means the handshake era and the
child's ``legacy`` mode (2025-11-25); a request with the 2026-07-28 envelope means ``auto``, as
before (``server/discover``; a child that cannot, such as a 1.x-SDK server, falls back to legacy).

Until the host's first request the children wait, spawned and silent, however long it takes:
nothing needs a child before that request (every use of one follows a request of the host's, and
that request is what tells the era), while a guess would be wrong for one of the two eras and
cost either a restart (the cold start the early spawn saves) or a child in the other era for the
whole connection. A child that died meanwhile is found and reported at its handshake, as ever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from gatekeeper.proxy.protocol.mcp import MODERN_PROTOCOL_VERSIONS

if TYPE_CHECKING:
    from gatekeeper.proxy.servers.downstream import Downstream

MATCH = "match"
"""The downstream mode that follows the host's era; ``auto`` and ``legacy`` are proxy/servers/stdio/handshake.py's."""


def child_mode(host_version: str) -> str:
    """The client mode (servers/stdio/handshake.py) that speaks to a child in the era of a host at ``host_version``."""
    return "auto" if host_version in MODERN_PROTOCOL_VERSIONS else "legacy"


class HostEra:
    """The protocol revision of the host's connection, learnt once from its first request."""

    def __init__(self) -> None:
        self.version: str | None = None
        self._known = anyio.Event()

    def heard(self, version: str, request: bool) -> None:
        """A message the host side accepted (proxy/session.py): the first request decides.
        Notifications do not (one may come before the request, and requests alone lock the era)."""
        if request and self.version is None:
            self.version = version
            self._known.set()

    async def supervise(self, downstream: Downstream) -> None:
        """``downstream.supervise``; in ``match`` mode, once the host's era is known and in it."""
        if downstream.mode == MATCH:
            await self._known.wait()
            assert self.version is not None
            downstream.mode = child_mode(self.version)
            downstream.note(
                f"the host speaks {self.version}: connecting to {downstream.name} in "
                f"{downstream.mode} mode (--downstream-mode {MATCH})"
            )
        await downstream.supervise()

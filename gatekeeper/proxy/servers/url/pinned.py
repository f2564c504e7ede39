"""The network backend of a url server's connection pool: only the addresses checked at start.

Its own module so that httpcore2 (and h11 under it) is imported only when a url server is
configured (proxy/servers/url/connection.py ``GuardedTransport``), not by every ``gatekeeper proxy`` at start.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anyio
import httpcore2

from gatekeeper.proxy.servers.url.addresses import Target


class Pinned(httpcore2.AsyncNetworkBackend):
    """Connects to the checked addresses only: the HTTP library never resolves the name again."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._backend = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        if host.strip("[]").lower() != self._target.host:
            raise httpcore2.ConnectError(f"refusing to connect to {host!r}: only {self._target.host!r} was checked")
        last: Exception = httpcore2.ConnectError("no address")
        for address in self._target.addresses:
            try:
                return await self._backend.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except httpcore2.ConnectError as exc:
                last = exc
        raise last

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)

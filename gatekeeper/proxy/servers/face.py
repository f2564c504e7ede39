"""The one face the proxy's callers see of a live downstream server: wire dicts in and out.

Listing, passthrough, completion and the proxy's tools/call ask a server through this and
nothing else, so none of them needs the SDK's models (issue 12). Our own client
(proxy/servers/stdio/client.py) gives it for stdio children; a thin adaptor over the SDK's ``Client``
(proxy/servers/url/sdkclient.py, loaded only when the policy has a url server) for url servers. An error
answer, or the end of the connection (-32000 "Connection closed"), is an ``RpcError``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from gatekeeper.proxy.protocol.rpc import Json

__all__ = ["ChildClient", "DownstreamGone", "DownstreamUnavailable", "Progress", "Stamp"]

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
Stamp = Callable[[Json], dict[str, str]]
"""Puts a 2026 child's envelope on a raw request in place; returns the HTTP headers it goes with."""


class DownstreamUnavailable(Exception):
    """The server is not running and could not be (re)started now; the message says why."""


class DownstreamGone(Exception):
    """The server's connection closed during a call."""


class ChildClient(Protocol):
    """A live connection to one downstream server, after its handshake."""

    protocol_version: str
    server_capabilities: Json  # as the server declared them (``completions`` among them)
    stamp: Stamp | None  # None: raw forwarding (proxy/fast/rewrite.py) cannot stamp requests for it

    async def request(self, method: str, params: Json | None = None, on_progress: Progress | None = None) -> Json:
        """One request; its raw result, the later revision's fields dropped for a handshake-era server."""
        ...

    def listen(self, *, tools_list_changed: bool = False) -> AbstractAsyncContextManager[None]:
        """A 2026 listen stream held open while the block runs; entered once it is acknowledged."""
        ...

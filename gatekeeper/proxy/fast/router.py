"""What the fast path asks of the routing above it: where a raw request may go, and the host's levels.

``Proxy`` (proxy/routing.py) is the one router; the fast path names only this face of it, so no
import runs from the raw path back up to the routing that owns it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gatekeeper.proxy.fast.rewrite import ChildView
    from gatekeeper.proxy.host.call import HostCall
    from gatekeeper.proxy.servers.downstream import Downstream


class Router(Protocol):
    """The routing decisions raw forwarding takes, made as the regular path makes them."""

    @property
    def active(self) -> Mapping[str, HostCall]:
        """Each server's latest in-flight call on the regular path (its logs are attributed there)."""
        ...

    @property
    def downstreams(self) -> Mapping[str, Downstream]: ...

    def fast_route(self, name: str, meta: dict[str, Any] | None) -> tuple[Downstream, str, ChildView] | None: ...

    def fast_resource(self, uri: str) -> tuple[Downstream, ChildView] | None: ...

    def fast_prompt(self, name: str) -> tuple[Downstream, str, ChildView] | None: ...

    def fast_completion(self, kind: str, key: str) -> tuple[Downstream, str, ChildView] | None: ...

    def fast_client(self, downstream: Downstream) -> ChildView | None: ...

    def log_levels(self) -> frozenset[str] | None: ...

    def host_version(self) -> str | None: ...

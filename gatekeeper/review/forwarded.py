"""``X-Forwarded-Proto``/``-Host``/``-For``, believed only from the reverse proxies the operator named.

Behind a TLS-terminating proxy the page sees plain http from the proxy's address; the proxy says
what the browser used. From a trusted peer (``--trusted-proxy``, IPs or CIDR) those headers become
the scope's scheme, Host header and client; from anyone else they are removed, so no later part
(the Host/Origin guard, cookies, HSTS) can be talked into https or another name by a forged header.
uvicorn's own ``proxy_headers`` is turned off (it trusts 127.0.0.1 by default and ignores
``X-Forwarded-Host``): this middleware is the one place that decides.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from gatekeeper.errors import InvalidInput

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
PROTO, HOST, FOR = b"x-forwarded-proto", b"x-forwarded-host", b"x-forwarded-for"
FORWARDED = {PROTO, HOST, FOR}


def networks(values: Iterable[str]) -> tuple[Network, ...]:
    """``--trusted-proxy`` values as networks; a clear error for one that is no IP or CIDR."""
    found = []
    for value in values:
        try:
            found.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise InvalidInput(
                f"--trusted-proxy {value!r} is not an IP address or network",
                "give the reverse proxy's address as the page sees it, such as 127.0.0.1, 10.0.0.5 or 10.0.0.0/24",
            ) from None
    return tuple(found)


def trusted(address: str | None, trusted_networks: tuple[Network, ...]) -> bool:
    if not address or not trusted_networks:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:  # a unix socket path, or nothing
        return False
    return any(ip in net for net in trusted_networks)


def last(value: bytes) -> str:
    """The last comma-separated entry: the one the nearest (trusted) proxy wrote."""
    return value.decode("latin-1").split(",")[-1].strip()


class Forwarded:
    """Pure ASGI middleware, outermost: rewrite the scope from a trusted proxy, else drop the headers."""

    def __init__(self, app: ASGIApp, trusted_networks: tuple[Network, ...]) -> None:
        self.app, self.trusted_networks = app, trusted_networks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            scope = self.rewritten(scope)
        await self.app(scope, receive, send)

    def rewritten(self, scope: Scope) -> Scope:
        raw: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
        sent = {k.lower(): v for k, v in raw if k.lower() in FORWARDED}
        if not sent:
            return scope
        kept = [(k, v) for k, v in raw if k.lower() not in FORWARDED]
        scope = dict(scope)
        client = scope.get("client")
        if trusted(client[0] if client else None, self.trusted_networks):
            if PROTO in sent and last(sent[PROTO]).lower() in ("http", "https"):
                scope["scheme"] = last(sent[PROTO]).lower()
            if HOST in sent and last(sent[HOST]):
                host = last(sent[HOST]).encode("latin-1")
                kept = [(k, v) for k, v in kept if k.lower() != b"host"] + [(b"host", host)]
            if FOR in sent:
                scope["client"] = (self.client_of(sent[FOR]), 0)
        scope["headers"] = kept
        return scope

    def client_of(self, value: bytes) -> str:
        """The first address from the right that is not one of the trusted proxies."""
        hops = [hop.strip() for hop in value.decode("latin-1").split(",") if hop.strip()]
        for hop in reversed(hops):
            if not trusted(hop, self.trusted_networks):
                return hop
        return hops[0] if hops else ""

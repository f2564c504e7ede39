"""Where a ``url`` server may be: the name resolved once per connection, every address judged.

The policy already checked what the URL says literally (``policy/remote.py``); this checks what
the name resolves to *now*, so a public-looking name cannot lead the proxy to the cloud metadata
service, the LAN or this machine. The address returned is the one the connection must use
(``proxy/servers/url/connection.py`` pins it), so a second DNS answer cannot switch it (DNS rebinding).
Pure logic apart from the resolver, which tests inject.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from gatekeeper.policy import Server
from gatekeeper.policy.remote import is_loopback_host, url_host

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

METADATA_NAMES = frozenset({"metadata.google.internal"})
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200"))
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: someone's private network
_UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")


class AddressRefused(Exception):
    """The server's name leads somewhere the policy does not allow; the message says what to do."""

    def __init__(self, message: str, *, host: str, address: str | None, why: str) -> None:
        super().__init__(message)
        self.host, self.address, self.why = host, address, why


@dataclass(frozen=True)
class Target:
    """The addresses to connect to for ``host``, in order (TLS still checks ``host``)."""

    host: str
    addresses: tuple[str, ...]
    port: int


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for ``host`` (blocking: run it in a thread)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


def classify(address: IPAddress) -> str | None:
    """Why ``address`` is not a public one (``None`` when it is)."""
    if _plain(address) != address:
        return classify(_plain(address))
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    checks = (
        (address.is_unspecified, "the unspecified address"),
        (address.is_loopback, "a loopback address"),
        (address.is_link_local, "a link-local address"),
        (address.is_multicast, "a multicast address"),
        (address in _SHARED, "a shared (carrier-grade NAT) address"),
        (isinstance(address, ipaddress.IPv6Address) and address in _UNIQUE_LOCAL, "a private address"),
        (address.is_reserved, "a reserved address"),
        (address.is_private, "a private address"),
        (not address.is_global, "a non-public address"),
    )
    return next((why for hit, why in checks if hit), None)


def _plain(address: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 address (``::ffff:10.0.0.1``) is the IPv4 address it carries."""
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return mapped or address


def _allowed(address: IPAddress, networks: Iterable[str]) -> bool:
    return any(address in ipaddress.ip_network(n, strict=False) for n in networks)


def _port(server: Server) -> int:
    parts = urlsplit(server.url or "")
    return parts.port or (443 if parts.scheme == "https" else 80)


def decide(name: str, server: Server, addresses: list[str]) -> Target:
    """The address to connect to, or ``AddressRefused`` naming the server, host, address and the fix."""
    host, port = url_host(server.url or ""), _port(server)
    if not addresses:
        raise OSError(f"{host!r} did not resolve to any address")
    if host.rstrip(".") in METADATA_NAMES:
        raise AddressRefused(
            f"{host!r} is a cloud metadata service name; Gatekeeper never connects to it",
            host=host,
            address=addresses[0],
            why="a cloud metadata name",
        )
    parsed = [_plain(ipaddress.ip_address(a.split("%", 1)[0])) for a in addresses]
    loopback = is_loopback_host(host)
    for address in parsed:
        why = classify(address)
        if loopback:
            why = None if address.is_loopback else f"not a loopback address although {host!r} is loopback"
        elif why is not None and address not in METADATA_ADDRESSES and _allowed(address, server.allow_addresses):
            why = None
        if why is not None:
            if loopback:
                hint = "point the url at 127.0.0.1 or ::1"
            elif address in METADATA_ADDRESSES:
                hint = "Gatekeeper never connects to a cloud metadata service"
            else:
                hint = f"if this is the server you mean, add it to the policy: allow_addresses: ['{address}']"
            raise AddressRefused(
                f"{host!r} resolves to {address}, {why}; refused ({hint})",
                host=host,
                address=str(address),
                why=why,
            )
    return Target(host=host, addresses=tuple(str(a) for a in parsed), port=port)


def resolve(name: str, server: Server, resolver: Resolver = system_resolver) -> Target:
    """Resolve the server's host once and decide (blocking; callers run it in a worker thread)."""
    host = url_host(server.url or "")
    try:
        addresses = list(dict.fromkeys(resolver(host, _port(server))))
    except OSError as exc:  # not a refusal: the name may resolve on the next try
        raise OSError(f"cannot resolve {host!r}: {exc}") from None
    return decide(name, server, addresses)

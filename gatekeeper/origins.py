"""Origins and Host names as a browser writes them: what the review page, its relying party and the
policy's ``review:`` section compare. Stdlib only (the committer and the proxy import it)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def is_loopback_host(hostname: str) -> bool:
    """``localhost`` or a loopback address: names that never leave this machine."""
    if hostname == "localhost" or hostname.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(hostname.strip("[]")).is_loopback
    except ValueError:
        return False


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL, default port dropped (what a browser sends as Origin)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port and parts.port != DEFAULT_PORTS.get(parts.scheme) else ""
    return f"{parts.scheme}://{host}{port}"


def host_of(url: str) -> str:
    """The Host header a browser sends for a URL (its origin without the scheme)."""
    return origin_of(url).split("://", 1)[1]


def public_origin(review_url: str) -> str | None:
    """The origin of a ``review_url`` at a public name (a team's page), None for one on loopback."""
    hostname = urlsplit(review_url).hostname
    return origin_of(review_url) if hostname and not is_loopback_host(hostname) else None

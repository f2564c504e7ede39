"""What the policy says about a server reached over Streamable HTTP: its URL and its headers.

Secrets never sit in the policy: a header's value names an environment variable (and an
optional prefix such as ``"Bearer "``), read when the proxy connects. So the policy, its
digest, ``policy check`` and the audit log can show everything written here without leaking
a token. Whether an address may be reached at all is decided twice: here for what the URL
says literally (scheme, loopback or not), and at each connection for what the name resolves
to (``gatekeeper/proxy/servers/url/addresses.py``).
"""

from __future__ import annotations

import ipaddress
import os
import re
from urllib.parse import SplitResult, urlsplit

from pydantic import BaseModel, ConfigDict, StrictStr, field_validator

from gatekeeper.policy.messages import fail

__all__ = [
    "DEFAULT_TIMEOUT",
    "Header",
    "check_network",
    "check_url",
    "header_from_yaml",
    "is_loopback_host",
    "url_host",
]

DEFAULT_TIMEOUT = 30.0  # seconds for one request to the server, answer included
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an RFC 9110 token
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Set by Gatekeeper itself on every request; a policy header may not replace them.
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "content-type", "accept", "mcp-session-id", "mcp-protocol-version"}
)


class Header(BaseModel):
    """``{env: NAME, prefix: "Bearer "}``: the value is ``prefix + $NAME`` at connection time."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    env: StrictStr
    prefix: StrictStr = ""

    @field_validator("env")
    @classmethod
    def _env(cls, value: str) -> str:
        if not _ENV_NAME.fullmatch(value):
            fail(f"expected an environment variable name such as 'NOTES_TOKEN', got {value!r}")
        return value

    def value(self, environ: os._Environ[str] | dict[str, str] | None = None) -> str | None:
        """The header's value from the environment, or None when the variable is not set."""
        found = (os.environ if environ is None else environ).get(self.env)
        return None if found is None else self.prefix + found


def header_from_yaml(name: object, value: object) -> object:
    """A plain string is refused: it would put a credential into the policy file."""
    if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
        fail(f"header name {name!r} is not a valid HTTP header name")
    if name.lower() in RESERVED_HEADERS:
        fail(f"header {name!r} is set by Gatekeeper itself; remove it from the policy")
    if isinstance(value, str):
        fail(
            f"header {name!r}: write {{env: VARIABLE}} (optionally with prefix: 'Bearer '), not the value itself: "
            "secrets stay in the environment, never in the policy"
        )
    return value


def url_host(url: str) -> str:
    """The host part of a URL without brackets (``::1`` for ``http://[::1]:3000``)."""
    return (urlsplit(url).hostname or "").lower()


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback address literal; other names are checked once resolved."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, allow_remote: bool) -> str:
    """The URL if its form is acceptable: http(s), a host, no credentials; https off loopback."""
    try:
        parts: SplitResult = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        fail(f"url {url!r} is not a valid URL ({exc})")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        fail(f"expected an http:// or https:// URL such as 'http://127.0.0.1:3000/mcp', got {url!r}")
    if parts.username is not None or parts.password is not None:
        fail("the url must not carry credentials (user:password@); put them in 'headers' from the environment")
    if parts.fragment:
        fail(f"the url must not have a #fragment, got {url!r}")
    if not is_loopback_host(parts.hostname.lower()):
        if not allow_remote:
            fail(
                f"{parts.hostname!r} is not a loopback address: servers off this machine need 'allow_remote: true' "
                "(and https)"
            )
        if parts.scheme != "https":
            fail(f"a remote server must use https, got {url!r}")
    return url


def check_network(value: str) -> str:
    """An entry of ``allow_addresses``: an address or a network such as ``10.0.0.0/8``."""
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        fail(f"expected an IP address or network such as '10.1.2.3' or '10.0.0.0/8', got {value!r}")
    return value

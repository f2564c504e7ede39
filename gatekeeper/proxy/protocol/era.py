"""The two protocol eras as both sides meet them: a 2026-07-28 request's envelope judged, and who we are.

The host side refuses a request whose envelope fails (``Rejection``'s code and text, as the SDK 2.3
server answers them); the fast path classifies a raw request the same way before it forwards it.
Stdlib only: nothing here may cost start-up time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gatekeeper import __version__
from gatekeeper.proxy.protocol import mcp as w

SERVER_NAME: Final = "gatekeeper"
_REQUIRED = (w.PROTOCOL_VERSION_META_KEY, w.CLIENT_CAPABILITIES_META_KEY)


@dataclass(frozen=True)
class Rejection:
    """A request refused before any handler runs: a JSON-RPC error's fields."""

    code: int
    message: str
    data: Any = None

    def error(self) -> dict[str, Any]:
        """The ``error`` member of the answer (``data`` only when there is one, as the SDK writes it)."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


@dataclass(frozen=True)
class Envelope:
    """A 2026-07-28 request's accepted envelope (``clientInfo`` is optional and its shape unchecked)."""

    protocol_version: str
    client_info: Any
    client_capabilities: Any


def has_envelope(params: Any) -> bool:
    """Whether ``params._meta`` holds the protocol-version key (legacy ``_meta`` never does)."""
    if not isinstance(params, Mapping) or not params:
        return False
    meta = params.get("_meta")
    return isinstance(meta, Mapping) and w.PROTOCOL_VERSION_META_KEY in meta


def classify(params: Any) -> Envelope | Rejection:
    """A 2026-07-28 request's envelope, or the first rung it fails (stdio: no header rung)."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    if not isinstance(meta, Mapping):
        return Rejection(
            w.INVALID_PARAMS,
            f"params._meta must be an object carrying the required {w.PROTOCOL_VERSION_META_KEY!r} and "
            f"{w.CLIENT_CAPABILITIES_META_KEY!r} envelope keys",
        )
    missing = [key for key in _REQUIRED if key not in meta]
    if missing:
        return Rejection(
            w.INVALID_PARAMS, f"params._meta is missing the required envelope key(s): {', '.join(missing)}"
        )
    version = meta[w.PROTOCOL_VERSION_META_KEY]
    if not isinstance(version, str):
        return Rejection(w.INVALID_PARAMS, "the protocol-version envelope value must be a string")
    if version not in w.MODERN_PROTOCOL_VERSIONS:
        return unsupported(version)
    return Envelope(version, meta.get(w.CLIENT_INFO_META_KEY), meta[w.CLIENT_CAPABILITIES_META_KEY])


def unsupported(requested: str) -> Rejection:
    """-32022 naming the versions served, for an envelope at a version we do not serve."""
    data = {"supported": list(w.MODERN_PROTOCOL_VERSIONS), "requested": requested}
    return Rejection(w.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", data)


def server_info() -> dict[str, Any]:
    """Gatekeeper's ``serverInfo`` (a fresh dict: a caller may change its copy)."""
    return {"name": SERVER_NAME, "version": __version__}

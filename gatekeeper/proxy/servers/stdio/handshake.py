"""The handshake with a child, as the SDK client does it (``mcp/client/_probe.py``, ``session.py``).

``auto``: a ``server/discover`` probe at 2026-07-28 carrying the envelope; a -32022 naming a mutual
version means one re-probe at it; any other error, a result that is not a discover result, or one
without a modern version means ``initialize`` on the same connection, and a -32022 answer to that
``initialize`` (a slow starter the probe locked modern after all) one more probe. ``legacy``:
``initialize`` at 2025-11-25, then ``notifications/initialized``. We introduce ourselves as the
SDK client does (``mcp`` 0.1.0, roots with ``listChanged``): changing that is a visible decision
of its own. Shapes we are unsure of go to the SDK's own models, imported only then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gatekeeper.proxy.protocol import mcp as w
from gatekeeper.proxy.protocol.rpc import Json, RpcError
from gatekeeper.proxy.servers.stdio.rpc import ChildSession

CLIENT_INFO: Json = {"name": "mcp", "version": "0.1.0"}
CAPABILITIES: Json = {"roots": {"listChanged": True}}  # as the SDK client with a roots callback
DISCOVER_TIMEOUT = 10.0  # the SDK client's (proxy/servers/downstream.py cuts a silent child off sooner)
LOG_LEVEL = "debug"  # what the proxy's SDK client asked every 2026 request for (proxy/fast/rewrite.py)


@dataclass(frozen=True)
class Negotiated:
    """What the handshake settled: the revision, the child's capabilities and identity."""

    protocol_version: str
    server_capabilities: Json
    server_info: Json | None
    instructions: str | None
    result: Json = field(repr=False)  # the raw initialize or discover result

    @property
    def modern(self) -> bool:
        return self.protocol_version in w.MODERN_PROTOCOL_VERSIONS

    @property
    def envelope(self) -> Json:
        """The ``_meta`` keys every request to a 2026 child carries; none for a handshake-era one."""
        if not self.modern:
            return {}
        return {
            w.PROTOCOL_VERSION_META_KEY: self.protocol_version,
            w.CLIENT_INFO_META_KEY: CLIENT_INFO,
            w.CLIENT_CAPABILITIES_META_KEY: CAPABILITIES,
            w.LOG_LEVEL_META_KEY: LOG_LEVEL,
        }

    def stamp(self, message: Json) -> None:
        """Put the envelope on a request in place (a request's own log level wins), as the SDK's
        ``_make_modern_stamp`` does; a handshake-era child's requests go as they are."""
        if not self.modern:
            return
        meta = message.setdefault("params", {}).setdefault("_meta", {})
        for key, value in self.envelope.items():
            if key == w.LOG_LEVEL_META_KEY:
                meta.setdefault(key, value)
            else:
                meta[key] = value


async def negotiate(session: ChildSession, mode: str) -> Negotiated:
    """Run the handshake in ``mode`` (``auto`` or ``legacy``) and set the session's era and stamp."""
    if mode == "legacy":
        done = await initialize(session)
    elif mode == "auto":
        done = await _auto(session)
    else:
        raise ValueError(f"mode must be 'auto' or 'legacy', not {mode!r}")
    session.version = done.protocol_version
    session.stamp = done.stamp if done.modern else None
    return done


async def _auto(session: ChildSession) -> Negotiated:
    version = w.LATEST_MODERN_VERSION
    for attempt in range(2):
        try:
            raw = await discover(session, version)
        except RpcError as exc:
            if exc.code == w.UNSUPPORTED_PROTOCOL_VERSION:
                supported = _supported(exc.data)
                mutual = [v for v in w.MODERN_PROTOCOL_VERSIONS if v in (supported or ())]
                if mutual and attempt == 0:
                    version = mutual[-1]
                    continue
                if supported is not None and not any(v in w.HANDSHAKE_PROTOCOL_VERSIONS for v in supported):
                    raise  # modern only, and no version in common: a real incompatibility
            try:
                return await initialize(session)
            except RpcError as handshake:
                mutual = [v for v in w.MODERN_PROTOCOL_VERSIONS if v in (_supported(handshake.data) or ())]
                if handshake.code != w.UNSUPPORTED_PROTOCOL_VERSION or attempt != 0 or not mutual:
                    raise
                version = mutual[-1]
                continue
        result = _discover_result(raw)
        if result is None or not any(v in result["supportedVersions"] for v in w.MODERN_PROTOCOL_VERSIONS):
            return await initialize(session)  # not modern evidence: the handshake era
        return _adopt(result)
    raise AssertionError("unreachable")  # pragma: no cover: the loop returns or raises


async def discover(session: ChildSession, version: str) -> Json:
    """One ``server/discover`` at ``version`` with the envelope (no log level: it is no call)."""
    meta = {
        w.PROTOCOL_VERSION_META_KEY: version,
        w.CLIENT_INFO_META_KEY: CLIENT_INFO,
        w.CLIENT_CAPABILITIES_META_KEY: CAPABILITIES,
    }
    raw = await session.request("server/discover", {"_meta": meta}, timeout=DISCOVER_TIMEOUT, cancellable=False)
    ttl = raw.get("ttlMs")  # the SDK floors a negative ttl rather than fail the probe on it
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        raw["ttlMs"] = 0
    return raw


async def initialize(session: ChildSession) -> Negotiated:
    """``initialize`` at the latest handshake revision, then ``notifications/initialized``."""
    params = {"protocolVersion": w.LATEST_HANDSHAKE_VERSION, "capabilities": CAPABILITIES, "clientInfo": CLIENT_INFO}
    raw = await session.request("initialize", params, cancellable=False)
    result = raw if _plain_initialize(raw) else _oracle("InitializeResult", raw)
    version = result["protocolVersion"]
    if version not in w.HANDSHAKE_PROTOCOL_VERSIONS:
        raise RuntimeError(f"Unsupported protocol version from the server: {version}")
    session.version = version
    await session.notify("notifications/initialized")
    return Negotiated(version, result["capabilities"], result["serverInfo"], result.get("instructions"), raw)


def _adopt(result: Json) -> Negotiated:
    version = [v for v in w.MODERN_PROTOCOL_VERSIONS if v in result["supportedVersions"]][-1]
    meta = result.get("_meta") or {}
    info = _server_info(meta.get(w.SERVER_INFO_META_KEY))
    return Negotiated(version, result["capabilities"], info, result.get("instructions"), result)


def _supported(data: Any) -> list[str] | None:
    """``data.supported`` of a -32022, if the error data has the SDK's shape (``requested`` too)."""
    if not isinstance(data, dict) or not isinstance(data.get("requested"), str):
        return None
    supported = data.get("supported")
    if not isinstance(supported, list) or not all(isinstance(v, str) for v in supported):
        return None
    return supported


def _str_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _info(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("name"), str) and isinstance(value.get("version"), str)


def _plain_initialize(raw: Json) -> bool:
    return (
        isinstance(raw.get("protocolVersion"), str)
        and isinstance(raw.get("capabilities"), dict)
        and _info(raw.get("serverInfo"))
        and _str_or_none(raw.get("instructions"))
    )


def _discover_result(raw: Json) -> Json | None:
    """The discover result if it is one (the SDK's ``DiscoverResult``), else None (not modern evidence)."""
    versions, meta = raw.get("supportedVersions"), raw.get("_meta")
    plain = (
        isinstance(versions, list)
        and all(isinstance(v, str) for v in versions)
        and isinstance(raw.get("capabilities"), dict)
        and _str_or_none(raw.get("instructions"))
        and (meta is None or isinstance(meta, dict))
        and raw.get("cacheScope", "private") in ("public", "private")
        and isinstance(raw.get("ttlMs", 0), int)
        and isinstance(raw.get("resultType", ""), str)
    )
    if plain:
        return raw
    try:
        return _oracle("DiscoverResult", raw)
    except ValueError:  # pydantic's ValidationError
        return None


def _server_info(raw: Any) -> Json | None:
    """A 2026 child's serverInfo stamp; display only, so a malformed one reads as absent."""
    if raw is None:
        return None
    if _info(raw):
        return dict(raw)
    try:
        return _oracle("Implementation", raw)
    except ValueError:
        return None


def _oracle(model: str, raw: Json) -> Json:
    """The SDK's own model decides an unusual shape (imported only then): its dump, or its error."""
    import mcp_types

    validated = getattr(mcp_types, model).model_validate(raw, by_name=False)
    return dict(validated.model_dump(mode="json", by_alias=True, exclude_none=True))

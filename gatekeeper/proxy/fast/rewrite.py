"""What raw forwarding rewrites where host and child speak different protocol revisions.

The slow path (the host side, and the client toward the child) translates between eras; the fast
path (``proxy/fast/path.py``) does the same small rewrite itself, and only where it is known:

- a 2025-11-25 host, a 2026-07-28 child: the request gains the client's envelope (its ``stamp``:
  proxy/servers/stdio/handshake.py's for a stdio child, the SDK client's for a url server), the result loses
  the later revision's fields and the child's serverInfo stamp;
- a 2026-07-28 host: its per-request envelope is checked by the SDK's own classifier and taken off;
  a 2026 child gets the client's envelope instead, a handshake-era child none. The result gets
  ``resultType`` (a handshake-era child leaves it out) and the proxy's serverInfo stamp in place of
  the child's, as the regular path's shaping does (proxy/host/era.py). Log lines follow each request's log-level
  opt-in (``io.modelcontextprotocol/logLevel``), as ``ServerSession.send_log_message`` does.

Anything else (two different handshake-era revisions, two different 2026-era ones, a client
without a stamp) stays on the slow path.

The log level a 2025 host's calls ask a 2026 child for stays ``debug`` until the host sets one
(``ask_for``). Decided on figures (session 6, the bundled notes server on SDK 2.3, ``read_note``,
6,000 interleaved calls per variant): the child's CPU per call is the same with ``logLevel: debug``
as with no level at all (2,513 against 2,517 µs on a loaded machine: the SDK computes the allowed
levels once per request and a tool that does not log sends nothing). What does cost is the era
itself: the same child spoken to in 2026-07-28 spends ~15% more CPU per call (+360 µs there) than
in 2025-11-25 (the per-request envelope parsed and checked, serverInfo and resultType written).
Asking for less than ``debug`` would save nothing and would lose a 2025 host the log lines a
handshake-era server sends unconditionally (tests/test_proxy_loglevel.py, test_proxy_fastpath.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gatekeeper.proxy.protocol.era import Rejection, classify
from gatekeeper.proxy.protocol.mcp import (
    LEVELS,
    LOG_LEVEL_META_KEY,
    MODERN_PROTOCOL_VERSIONS,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    later_revision_fields,
)

METHODS = ("tools/call", "resources/read", "prompts/get", "completion/complete")
VERSION_HEADER = "mcp-protocol-version"  # the SDK's MCP_PROTOCOL_VERSION_HEADER (its module: slow import)
HOST_META = "io.modelcontextprotocol/"
"""The prefix of the 2026-07-28 envelope's keys: the host's, never forwarded to a child."""


@dataclass(frozen=True)
class ChildView:
    """A live client's era (proxy/servers/face.py) as raw forwarding sees it, toward one host version."""

    client: Any
    host_version: str
    usable: bool  # False: the slow path translates something this module does not
    modern: bool  # the child speaks 2026-07-28: requests carry the client's envelope
    stamp: Callable[[dict[str, Any]], dict[str, str]]  # the client's envelope, in place; its HTTP headers
    foreign: dict[str, frozenset[str]] | None  # per method: fields a 2025 host must not get from a 2026 child
    host_modern: bool = False  # the host speaks 2026-07-28: results get resultType and our serverInfo stamp
    pipe_meta: dict[str, Any] | None = field(default=None, init=False, compare=False)  # see ``envelope``

    def __post_init__(self) -> None:
        object.__setattr__(self, "pipe_meta", _envelope_of(self.stamp) if self.usable else None)

    def foreign_in(self, method: str) -> frozenset[str] | None:
        return None if self.foreign is None else self.foreign.get(method, frozenset())

    def envelope(self, request: dict[str, Any]) -> dict[str, str]:
        """``stamp`` for a pipe, which sends no headers: the stamp's ``_meta`` was taken once
        (``_envelope_of``) and is copied in, without building the HTTP headers on every call."""
        meta = self.pipe_meta
        if meta is None:
            self.stamp(request)
        elif meta:
            into = request["params"].setdefault("_meta", {})
            for key, value in meta.items():
                if key == LOG_LEVEL_META_KEY:
                    into.setdefault(key, value)  # the SDK's default: a request's own level wins
                else:
                    into[key] = value
        return {}

    @classmethod
    def of(cls, client: Any, host_version: str) -> ChildView:
        version = client.protocol_version
        if host_version in MODERN_PROTOCOL_VERSIONS:
            return cls._for_modern_host(client, host_version)
        if version not in MODERN_PROTOCOL_VERSIONS:
            # Two handshake-era revisions may differ in result shape: only the same one is raw.
            return cls(client, host_version, version == host_version, False, _handshake(version), None)
        stamp = getattr(client, "stamp", None)  # the client's own envelope (ChildClient.stamp)
        foreign = {m: later_revision_fields(m, host_version) for m in METHODS}
        if stamp is None or host_version in MODERN_PROTOCOL_VERSIONS:
            return cls(client, host_version, False, True, _no_stamp, None)
        return cls(client, host_version, True, True, stamp, foreign)

    @classmethod
    def _for_modern_host(cls, client: Any, host_version: str) -> ChildView:
        """A 2026-07-28 host: the request's envelope is replaced by the client's (a 2026 child)
        or dropped (a handshake-era child); the result gets the fields a 2026 result must carry."""
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return cls(client, host_version, True, False, _handshake(client.protocol_version), None, True)
        if client.protocol_version != host_version:
            return cls(client, host_version, False, True, _no_stamp, None, True)  # two 2026-era revisions
        stamp = getattr(client, "stamp", None)
        if stamp is None:
            return cls(client, host_version, False, True, _no_stamp, None, True)
        return cls(client, host_version, True, True, stamp, None, True)


def _envelope_of(stamp: Callable[[dict[str, Any]], dict[str, str]]) -> dict[str, Any] | None:
    """The ``_meta`` the stamp puts on a request, if it is the same for every raw method and the
    stamp touches nothing else (version, client info, capabilities, log level: proxy/servers/stdio/handshake.py's
    stamp and the SDK 2.3 one);
    None: ``stamp`` must run on each request."""
    seen: dict[str, Any] | None = None
    for method in METHODS:
        probe: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "method": method, "params": {}}
        try:
            stamp(probe)
        except Exception:  # a stamp that wants more than a bare request: it runs on each one instead
            return None
        params = probe["params"]
        meta = params.get("_meta", {})
        if set(probe) != {"jsonrpc", "id", "method", "params"} or set(params) - {"_meta"} or not isinstance(meta, dict):
            return None
        if seen is not None and meta != seen:
            return None
        seen = meta
    return seen


def _no_stamp(data: dict[str, Any]) -> dict[str, str]:
    return {}


def _handshake(version: str) -> Callable[[dict[str, Any]], dict[str, str]]:
    """A handshake-era child: no envelope; over HTTP, the version header its SDK stamp sends."""
    headers = {VERSION_HEADER: version}
    return lambda data: dict(headers)


def envelope_levels(message: dict[str, Any], meta: dict[str, Any], host_version: str | None) -> frozenset[str] | None:
    """The log levels a 2026 request opted in to, or None if the SDK must answer it: an envelope
    the SDK's own classifier refuses (``protocol/era.classify``, held to it by tests/test_hostera.py), a
    log level it would reject, a version not the host's."""
    if meta.get(PROTOCOL_VERSION_META_KEY) != host_version:
        return None
    requested = meta.get(LOG_LEVEL_META_KEY)
    if requested is not None and requested not in LEVELS:
        return None
    if isinstance(classify(message.get("params")), Rejection):
        return None
    return frozenset() if requested is None else frozenset(LEVELS[LEVELS.index(requested) :])


def ask_for(request: dict[str, Any], levels: frozenset[str] | None, child_modern: bool) -> None:
    """A 2026 host's request to a 2026 child asks the child for the host's own log opt-in, not the
    SDK client's ``debug``: the proxy would drop the rest anyway (and a server that logs does less
    work). A 2025 host gets every log line, as handshake-era servers send them unconditionally, so
    its requests keep ``debug`` (``levels`` None) until it sets a level with ``logging/setLevel``
    (then ``levels`` is that level and above); a handshake-era child has no per-request opt-in.
    ``debug`` itself costs a child that does not log nothing measurable (see the module's notes)."""
    if levels is None or not child_modern:
        return
    meta = request["params"].setdefault("_meta", {})
    if levels:
        meta[LOG_LEVEL_META_KEY] = LEVELS[len(LEVELS) - len(levels)]
    else:
        meta.pop(LOG_LEVEL_META_KEY, None)


def at_or_above(level: str | None) -> frozenset[str] | None:
    """The levels a ``logging/setLevel`` to ``level`` lets through (None: no level set, all)."""
    return None if level is None else frozenset(LEVELS[LEVELS.index(level) :])


def log_note(message: Any) -> tuple[str, dict[str, Any] | None]:
    """A child's log notification as the regular path re-sends it (level, data, logger), or None
    for anything else (the SDK client's to handle)."""
    params = message.get("params") if isinstance(message, dict) else None
    if not isinstance(params, dict) or message.get("method") != "notifications/message" or "id" in message:
        return "", None
    level, logger = params.get("level"), params.get("logger")
    if level not in LEVELS or "data" not in params or not (logger is None or isinstance(logger, str)):
        return "", None
    note: dict[str, Any] = {"level": level, "data": params["data"]}
    if logger is not None:
        note["logger"] = logger
    return level, note


_DEFAULTS: dict[str, dict[str, Any]] = {
    "tools/call": {"isError": False},
    "resources/read": {"ttlMs": 0, "cacheScope": "private"},  # required on the 2026 wire
}
"""Fields the regular path's result models fill in when the child left them out (their defaults)."""


def restamp(method: str, result: dict[str, Any], stamp: dict[str, Any]) -> bool:
    """A result for a 2026 host, rewritten in place: our serverInfo stamp in place of the child's,
    ``resultType`` and the model defaults the regular path adds where a handshake-era child left them
    out. False: not a complete result."""
    if result.get("resultType", "complete") != "complete":
        return False
    for key, value in _DEFAULTS.get(method, {}).items():
        result.setdefault(key, value)
    meta = result.get("_meta")
    meta = {k: v for k, v in meta.items() if k != SERVER_INFO_META_KEY} if isinstance(meta, dict) else {}
    meta[SERVER_INFO_META_KEY] = stamp
    result["_meta"] = meta
    result.setdefault("resultType", "complete")
    return True

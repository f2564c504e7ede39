"""The host side's protocol eras: what Gatekeeper answers that depends on them.

The era rules the host side's dispatcher needs, as the SDK 2.3 server applies them
(``mcp/server/runner.py``, ``mcp/shared/inbound.py``): which era a connection's first request opens,
the 2026-07-28 envelope checks with their exact codes and texts, the version ``initialize``
negotiates, the ``initialize`` and ``server/discover`` answers, how a result is shaped per era, and
``Connection``: the era lock, which methods exist at a revision, and the handshake gate.
``tests/test_hostera.py`` and ``tests/test_hostera_gate.py`` hold each against the SDK (its
classifier, a real ``Server`` in memory, Gatekeeper's own as ``Proxy`` builds it, and the proxy's
recorded answers). The envelope itself is judged on the ground floor (``proxy/protocol/era.py``).
Stdlib only: nothing here may cost start-up time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gatekeeper.proxy.protocol import mcp as w
from gatekeeper.proxy.protocol.era import (
    Rejection,
    classify,
    has_envelope,
    server_info,
)

INSTRUCTIONS: Final = (
    "Gatekeeper guards writes: tools marked [Gatekeeper] only propose a file, which a person approves or "
    "rejects on the review page. Use gatekeeper_proposal_status to follow one."
)
CACHEABLE_METHODS: Final = frozenset(
    {"tools/list", "resources/list", "resources/templates/list", "prompts/list", "resources/read", "server/discover"}
)
"""Results that carry ``ttlMs``/``cacheScope`` at 2026-07-28 (mcp_types.methods.CACHEABLE_METHODS)."""
CACHE_DEFAULTS: Final = {"ttlMs": 0, "cacheScope": "private"}
"""The SDK result models' defaults: immediately stale, never shared across authorisations."""


ENVELOPE_ON_LEGACY: Final = Rejection(
    w.INVALID_REQUEST,
    "this connection serves the handshake protocol era; requests carrying the 2026-07-28 envelope are not "
    "accepted on it",
)
"""A non-initialize request with the envelope's version key on a connection opened by the handshake."""


def opens_modern(method: str, params: Any) -> bool:
    """Whether a connection's first request opens the 2026-07-28 era, else the handshake era.

    The version key alone decides, not the whole envelope: a half-built one still opens the modern
    era and is then refused by ``classify``. ``initialize`` never does, even with an envelope.
    """
    return method != "initialize" and has_envelope(params)


def initialize_on_modern(params: Any) -> Rejection:
    """The answer to ``initialize`` on a 2026-07-28 connection: the handshake does not exist there."""
    requested = params.get("protocolVersion") if isinstance(params, Mapping) else None
    data: dict[str, Any] = {"supported": list(w.MODERN_PROTOCOL_VERSIONS)}
    if isinstance(requested, str):
        data["requested"] = requested
    return Rejection(
        w.UNSUPPORTED_PROTOCOL_VERSION,
        "connection is serving the 2026-07-28 protocol; the initialize handshake is not accepted",
        data,
    )


def negotiated_version(requested: str) -> str:
    """The version ``initialize`` settles on: the host's if it is a handshake version, else the latest.

    ``requested`` must already have passed the params check (a string): a non-string is -32602 there.
    """
    return requested if requested in w.HANDSHAKE_PROTOCOL_VERSIONS else w.LATEST_HANDSHAKE_VERSION


def capabilities(*, modern: bool, completions: bool) -> dict[str, Any]:
    """What Gatekeeper serves. On 2026-07-28 list changes and resource updates come on a listen
    stream, which is served, so ``subscribe`` is true there; the handshake era has no
    ``resources/subscribe`` handler. ``completions`` only while a downstream server offers them."""
    out: dict[str, Any] = {
        "logging": {},
        "prompts": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": modern},
        "tools": {"listChanged": True},
    }
    if completions:
        out["completions"] = {}
    return out


def initialize_result(requested: str, *, completions: bool) -> dict[str, Any]:
    """The answer to a handshake-era host's ``initialize`` (already shaped for its version)."""
    return {
        "protocolVersion": negotiated_version(requested),
        "capabilities": capabilities(modern=False, completions=completions),
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    }


def discover_result(*, completions: bool) -> dict[str, Any]:
    """The answer to ``server/discover`` on a 2026-07-28 connection, shaped for it."""
    result = {
        "supportedVersions": list(w.MODERN_PROTOCOL_VERSIONS),
        "capabilities": capabilities(modern=True, completions=completions),
        "instructions": INSTRUCTIONS,
    }
    return shape_result("server/discover", w.LATEST_MODERN_VERSION, result)


def shape_result(method: str, version: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """``result`` as a host at ``version`` must get it (a new dict; ``result`` is not changed).

    2026-07-28: cacheable results get the cache defaults where they set none (never an
    ``input_required`` one), every result a ``resultType`` (``complete`` unless set), and Gatekeeper's
    serverInfo stamp in ``_meta`` unless one is there. Handshake era: the fields the later revision
    added are dropped. Either era: top-level nulls are dropped (the SDK writes none). Unlike the SDK's
    sieve, nothing else is validated or dropped: the host does that.
    """
    drop = w.later_revision_fields(method, version)
    out = {key: value for key, value in result.items() if value is not None and key not in drop}
    if version not in w.MODERN_PROTOCOL_VERSIONS:
        return out
    if method in CACHEABLE_METHODS and out.get("resultType") != "input_required":
        out = {**CACHE_DEFAULTS, **out}
    if out.get("resultType") is None:
        out["resultType"] = "complete"
    meta = out.get("_meta")
    if meta is None:
        out["_meta"] = {w.SERVER_INFO_META_KEY: server_info()}
    elif isinstance(meta, dict):  # the 2026 surface types _meta: its nulls are dropped there too
        meta = {key: value for key, value in meta.items() if value is not None}
        if w.SERVER_INFO_META_KEY not in meta:  # a handler's own stamp wins
            meta[w.SERVER_INFO_META_KEY] = server_info()
        out["_meta"] = meta
    return out


# -- a connection's era and gate -------------------------------------------------------------------------

HANDSHAKE_METHODS: Final = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
    | {"tools/list", "tools/call", "resources/list", "resources/templates/list", "resources/read"}
    | {"prompts/list", "prompts/get", "completion/complete"}
)
"""The requests the handshake revisions define (the same at each; mcp_types.methods.CLIENT_REQUESTS)."""
MODERN_METHODS: Final = frozenset(
    {"server/discover", "subscriptions/listen", "tools/list", "tools/call", "resources/list"}
    | {"resources/templates/list", "resources/read", "prompts/list", "prompts/get", "completion/complete"}
)
SERVED: Final = (HANDSHAKE_METHODS | MODERN_METHODS) - {"resources/subscribe", "resources/unsubscribe"}
"""What Gatekeeper has a handler for (the rest of a revision's methods is -32601)."""
NOT_INITIALIZED: Final = Rejection(w.INVALID_PARAMS, "Invalid request parameters", "")
"""A request before the handshake (anything but ping): the SDK's words, kept for its clients."""
HELD_FRAMES: Final = 8
"""Notifications kept from before a connection's first request, replayed once its era is known."""


def method_not_found(method: str) -> Rejection:
    return Rejection(w.METHOD_NOT_FOUND, "Method not found", method)


class Connection:
    """One host connection's era (its first request decides, once) and its handshake gate.

    For each request: ``route`` (the era and envelope, and whether the method exists at that
    revision), then the caller checks the params (-32602), then ``gate`` (served, and past the
    handshake). ``initialized`` after answering ``initialize``; ``notified`` for each notification.
    """

    def __init__(self) -> None:
        self.modern: bool | None = None  # None: no request yet
        self.version: str = w.LATEST_HANDSHAKE_VERSION  # a handshake connection's until initialize settles it
        self.ready = False  # the gate: initialize answered, or notifications/initialized seen
        self._held: list[str] = []

    def route(self, method: str, params: Any) -> Rejection | str:
        """The version this request is served at, or its refusal."""
        if self.modern is None:
            self.modern = opens_modern(method, params)
            for held in self._held:
                self.notified(held)
            self._held = []
        if self.modern:
            if method == "initialize":
                return initialize_on_modern(params)
            envelope = classify(params)
            if isinstance(envelope, Rejection):
                return envelope
            version, methods = envelope.protocol_version, MODERN_METHODS
        else:
            if method != "initialize" and has_envelope(params):
                return ENVELOPE_ON_LEGACY
            version, methods = self.version, HANDSHAKE_METHODS
        return version if method in methods else method_not_found(method)

    def gate(self, method: str) -> Rejection | None:
        """After the params check: -32601 for what Gatekeeper does not serve, then the handshake gate
        (a modern connection has none: every request carries its envelope)."""
        if method not in SERVED:
            return method_not_found(method)
        if not self.modern and not self.ready and method not in ("ping", "initialize"):
            return NOT_INITIALIZED
        return None

    def initialized(self, requested: str) -> None:
        """``initialize`` was answered: the connection speaks the negotiated version from now on."""
        self.version, self.ready = negotiated_version(requested), True

    def notified(self, method: str) -> None:
        """A notification arrived: before the first request it waits (up to ``HELD_FRAMES``) for the era."""
        if self.modern is None:
            if len(self._held) < HELD_FRAMES:
                self._held.append(method)
        elif method == "notifications/initialized":
            self.ready = True  # (a modern connection has no gate to open)

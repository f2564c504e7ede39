"""The params check of a host's request: the shapes hosts send, judged by our own stdlib rules.

Why: the SDK server checks every request's params against its pydantic surface models
(``mcp_types.methods.validate_client_request``); importing those costs ~0.3 s and ~15 MiB, and
each check a model round trip. Here a small table of plain shape rules accepts what is plainly
valid at every revision, and only when a rule fails (or meets a shape it is unsure of, such as
icons in ``clientInfo``) is the SDK's validator imported and asked, so a refusal keeps exactly
today's -32602 text. The rules are strict where pydantic is lax (a bool is never an integer, a
number never a string): being stricter only sends more input to the oracle, never lets through
what the SDK refuses. ``tests/test_hostparams.py`` holds the two to the same answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from gatekeeper.proxy.host.era import HANDSHAKE_METHODS, MODERN_METHODS
from gatekeeper.proxy.protocol import mcp as w
from gatekeeper.proxy.protocol.rpc import RpcError

log = logging.getLogger("gatekeeper.proxy.hostparams")

Rule = Callable[[Any], bool]
"""True when a value is plainly valid; False: unsure, the SDK's validator decides."""


def text(value: Any) -> bool:
    return type(value) is str


def flag(value: Any) -> bool:
    return type(value) is bool


def obj(value: Any) -> bool:
    return type(value) is dict


def token(value: Any) -> bool:
    """A progress token: a string or an integer (a bool is neither here)."""
    return type(value) is str or type(value) is int


def one_of(*allowed: str) -> Rule:
    return lambda value: type(value) is str and value in allowed


def texts(value: Any) -> bool:
    return type(value) is list and all(type(item) is str for item in value)


def objects(value: Any) -> bool:
    """A mapping of names to objects (``experimental``, ``extensions``)."""
    return type(value) is dict and all(type(item) is dict for item in value.values())


def text_map(value: Any) -> bool:
    """Arguments of a prompt or a completion context: names to strings."""
    return type(value) is dict and all(type(item) is str for item in value.values())


def absent(value: Any) -> bool:
    """Only a missing or null value is plain (e.g. icons: the SDK checks each one)."""
    return False


def shape(required: Mapping[str, Rule] | None = None, optional: Mapping[str, Rule] | None = None) -> Rule:
    """An object with ``required`` members (never null) and ``optional`` ones (missing or null is
    fine); members it does not name are ignored, as the SDK's models ignore them."""
    needed, maybe = dict(required or {}), dict(optional or {})

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return False
        for key, rule in needed.items():
            if key not in value or not rule(value[key]):
                return False
        for key, rule in maybe.items():
            found = value.get(key)
            if found is not None and not rule(found):
                return False
        return True

    return check


IMPLEMENTATION: Final = shape(
    {"name": text, "version": text},
    {"title": text, "description": text, "websiteUrl": text, "icons": absent},
)
CAPABILITIES: Final = shape(
    optional={
        "roots": shape(optional={"listChanged": flag}),
        "sampling": shape(optional={"context": obj, "tools": obj}),
        "elicitation": shape(optional={"form": obj, "url": obj}),
        "experimental": objects,
        "extensions": objects,
        "tasks": absent,  # nested request kinds: rare, the SDK checks them
    }
)
LEGACY_META: Final = shape(optional={"progressToken": token})
ENVELOPE: Final = shape(
    {w.PROTOCOL_VERSION_META_KEY: text, w.CLIENT_CAPABILITIES_META_KEY: CAPABILITIES},
    {"progressToken": token, w.CLIENT_INFO_META_KEY: IMPLEMENTATION, w.LOG_LEVEL_META_KEY: one_of(*w.LEVELS)},
)
REFERENCE: Final = shape({"type": one_of("ref/prompt"), "name": text}, {"title": text})
RESOURCE_REFERENCE: Final = shape({"type": one_of("ref/resource"), "uri": text})
LISTEN_FILTER: Final = shape(
    optional={"toolsListChanged": flag, "promptsListChanged": flag, "resourcesListChanged": flag}
    | {"resourceSubscriptions": texts}
)
RETRY: Final[dict[str, Rule]] = {"requestState": text, "inputResponses": absent}
"""A 2026-07-28 retry after an ``input_required`` result (ignored at the handshake revisions)."""

BODIES: Final[dict[str, tuple[dict[str, Rule], dict[str, Rule]]]] = {
    "initialize": ({"protocolVersion": text, "capabilities": CAPABILITIES, "clientInfo": IMPLEMENTATION}, {}),
    "ping": ({}, {}),
    "server/discover": ({}, {}),
    "tools/list": ({}, {"cursor": text}),
    "resources/list": ({}, {"cursor": text}),
    "resources/templates/list": ({}, {"cursor": text}),
    "prompts/list": ({}, {"cursor": text}),
    "tools/call": ({"name": text}, {"arguments": obj, "task": absent, **RETRY}),
    "resources/read": ({"uri": text}, RETRY),
    "resources/subscribe": ({"uri": text}, {}),
    "resources/unsubscribe": ({"uri": text}, {}),
    "prompts/get": ({"name": text}, {"arguments": text_map, **RETRY}),
    "completion/complete": (
        {"ref": lambda v: REFERENCE(v) or RESOURCE_REFERENCE(v), "argument": shape({"name": text, "value": text})},
        {"context": shape(optional={"arguments": text_map})},
    ),
    "logging/setLevel": ({"level": one_of(*w.LEVELS)}, {}),
    "subscriptions/listen": ({"notifications": LISTEN_FILTER}, {}),
}
"""Per method: its required and optional params members (the envelope is added per era)."""
PARAMS_OPTIONAL: Final = frozenset({"ping", "tools/list", "resources/list", "resources/templates/list", "prompts/list"})
"""Handshake-era methods whose params may be left out (or null)."""


def _rules(modern: bool) -> dict[str, Rule]:
    meta = ("_meta", ENVELOPE)
    rules: dict[str, Rule] = {}
    for method, (required, optional) in BODIES.items():
        if modern and method in MODERN_METHODS:
            rules[method] = shape({**required, meta[0]: meta[1]}, optional)
        elif not modern and method in HANDSHAKE_METHODS:
            rules[method] = shape(required, {**optional, "_meta": LEGACY_META})
    return rules


LEGACY_RULES: Final = _rules(modern=False)
MODERN_RULES: Final = _rules(modern=True)


def plainly_valid(method: str, version: str, params: Any) -> bool:
    """Whether ``params`` pass without asking the SDK (False: unsure, not necessarily invalid)."""
    modern = version in w.MODERN_PROTOCOL_VERSIONS
    rule = (MODERN_RULES if modern else LEGACY_RULES).get(method)
    if rule is None:
        return False
    if params is None:
        return not modern and method in PARAMS_OPTIONAL
    return rule(params)


def check_params(method: str, version: str, params: Mapping[str, Any] | None) -> None:
    """The SDK server's surface check of a request's params: -32602 with Gatekeeper's text for bad
    params, -32601 for a method the revision does not define. The SDK is asked only when unsure."""
    if plainly_valid(method, version, params):
        return
    if method not in (MODERN_METHODS if version in w.MODERN_PROTOCOL_VERSIONS else HANDSHAKE_METHODS):
        raise RpcError(w.METHOD_NOT_FOUND, "Method not found", method)
    log.info("params of %s checked by the SDK's validator", method)
    oracle(method, version, params)


def oracle(method: str, version: str, params: Mapping[str, Any] | None) -> None:
    """The SDK's validator (imported now, once): today's answers, word for word."""
    from mcp_types.methods import validate_client_request
    from pydantic import ValidationError

    try:
        validate_client_request(method, version, params)
    except KeyError:
        raise RpcError(w.METHOD_NOT_FOUND, "Method not found", method) from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors())
        raise RpcError(w.INVALID_PARAMS, f"invalid params for {method}: {problems}") from None

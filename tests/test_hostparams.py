"""Our own params checks (proxy/host/params.py) against the SDK's validator they stand in for.

For any params, at any revision, ``check_params`` must answer as the SDK server's check did: pass
what it passes, and refuse what it refuses with the same code and text. The light rules may only
be stricter than the SDK (then the SDK is asked), never laxer. Generated params start from the
shapes hosts really send and mutate them member by member, so most land right on the edges.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gatekeeper.proxy.host.era import HANDSHAKE_METHODS, MODERN_METHODS
from gatekeeper.proxy.host.params import check_params, oracle, plainly_valid
from gatekeeper.proxy.protocol import mcp as w
from gatekeeper.proxy.protocol.rpc import RpcError

GENERATED = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ENVELOPE: dict[str, Any] = {
    w.PROTOCOL_VERSION_META_KEY: "2026-07-28",
    w.CLIENT_CAPABILITIES_META_KEY: {"roots": {"listChanged": True}, "elicitation": {"form": {}, "url": {}}},
    w.CLIENT_INFO_META_KEY: {"name": "mcp", "version": "0.1.0"},
    w.LOG_LEVEL_META_KEY: "debug",
    "progressToken": 7,
}
BODIES: dict[str, dict[str, Any]] = {
    "initialize": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"roots": {"listChanged": True}, "sampling": {}, "experimental": {"x": {}}},
        "clientInfo": {"name": "mcp", "version": "0.1.0", "title": "Host"},
    },
    "ping": {},
    "server/discover": {},
    "tools/list": {"cursor": "c1"},
    "resources/list": {},
    "resources/templates/list": {"cursor": "c"},
    "prompts/list": {},
    "tools/call": {"name": "notes__read_note", "arguments": {"path": "a.md", "n": [1, None]}},
    "resources/read": {"uri": "file:///a.md"},
    "resources/subscribe": {"uri": "file:///a.md"},
    "resources/unsubscribe": {"uri": "file:///a.md"},
    "prompts/get": {"name": "p", "arguments": {"a": "b"}},
    "completion/complete": {
        "ref": {"type": "ref/prompt", "name": "p"},
        "argument": {"name": "a", "value": "b"},
        "context": {"arguments": {"x": "y"}},
    },
    "logging/setLevel": {"level": "info"},
    "subscriptions/listen": {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["a"]}},
}
RICHER: dict[str, Any] = {
    "clientInfo": {"name": "h", "version": "1", "icons": [{"src": "i.png"}], "websiteUrl": "https://h"},
    w.CLIENT_INFO_META_KEY: {"name": "h", "version": "1", "icons": [{"src": "i.png", "sizes": ["1x1"]}]},
    "capabilities": {"tasks": {"requests": {}}, "extensions": {"e": {"a": 1}}, "roots": {}, "elicitation": {}},
    w.CLIENT_CAPABILITIES_META_KEY: {"tasks": {}, "extensions": {"e": {}}, "sampling": {"tools": {}}},
    "task": {"ttl": 5},
    "inputResponses": {"r": {"action": "accept"}},
    "requestState": "s",
    "context": {"arguments": {}},
}
"""Members hosts rarely send, each put in where its parent is (the generator adds them)."""
VERSIONS = (*w.HANDSHAKE_PROTOCOL_VERSIONS, *w.MODERN_PROTOCOL_VERSIONS)
ODD: list[Any] = (
    [None, True, False, 0, 1, -5, 1.0, 1.5, "", "1", "x", "true", "debug", "ref/prompt", "ref/resource",
     "2025-11-25", [], ["a"], [1], {}, {"a": "b"}, {"a": 1}, {"listChanged": True}, {"listChanged": "yes"},
     {"name": "n", "version": "v"}, {"name": 1, "version": "v"}, {"src": "i.png"}, {"form": {}}, {"requests": {}}]
)  # fmt: skip
ODD_VALUES = st.sampled_from(ODD)
KEY_LIST: list[str] = (
    ["name", "version", "title", "icons", "uri", "cursor", "arguments", "level", "ref", "argument", "value",
     "context", "type", "roots", "sampling", "elicitation", "experimental", "extensions", "tasks", "listChanged",
     "form", "url", "notifications", "toolsListChanged", "resourceSubscriptions", "progressToken", "_meta",
     "protocolVersion", "capabilities", "clientInfo", "task", "requestState", "inputResponses", "websiteUrl",
     w.PROTOCOL_VERSION_META_KEY, w.CLIENT_CAPABILITIES_META_KEY, w.CLIENT_INFO_META_KEY, w.LOG_LEVEL_META_KEY]
)  # fmt: skip
KEYS = st.sampled_from(KEY_LIST)


def sdk_answer(method: str, version: str, params: Any) -> tuple[int, str, Any] | None:
    try:
        oracle(method, version, params)
    except RpcError as exc:
        return exc.code, exc.message, exc.data
    return None


def our_answer(method: str, version: str, params: Any) -> tuple[int, str, Any] | None:
    try:
        check_params(method, version, params)
    except RpcError as exc:
        return exc.code, exc.message, exc.data
    return None


def template(method: str, version: str) -> dict[str, Any]:
    body = dict(BODIES[method])
    if version in w.MODERN_PROTOCOL_VERSIONS:
        body["_meta"] = dict(ENVELOPE)
    elif method != "ping":
        body["_meta"] = {"progressToken": "t"}
    return body


def paths(value: Any, here: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every member's path in ``value`` (objects only), ``()`` for the whole."""
    found = [here]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*here, key))
    return found


def edited(value: Any, path: tuple[str, ...], action: int, key: str, odd: Any) -> Any:
    """``value`` with the member at ``path`` replaced by ``odd`` (0), dropped (1), or given a member
    ``key`` = ``odd`` (2, where it is an object)."""
    if not path:
        if action == 2 and isinstance(value, dict):
            return {**value, key: odd}
        return odd
    out = dict(value)
    if len(path) == 1 and action == 1:
        out.pop(path[0], None)
        return out
    out[path[0]] = edited(out[path[0]], path[1:], action, key, odd)
    return out


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with one to three members (at any depth) replaced, dropped or added."""
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths(value)))
        value = edited(value, path, draw(st.integers(0, 2)), draw(KEYS), draw(ODD_VALUES))
    return value


def enriched(value: Any, only: str | None = None) -> Any:
    """``value`` with the ``RICHER`` members (or just ``only``) in place of its own."""
    if not isinstance(value, dict):
        return value
    out = {key: enriched(item, only) for key, item in value.items()}
    return out | {key: item for key, item in RICHER.items() if key in out and only in (None, key)}


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, Any]:
    version = draw(st.sampled_from(VERSIONS))
    methods = MODERN_METHODS if version in w.MODERN_PROTOCOL_VERSIONS else HANDSHAKE_METHODS
    method = draw(st.sampled_from(sorted(methods)))
    body = template(method, version)
    if draw(st.booleans()):
        body = enriched(body)
    params = draw(st.one_of(st.just(None), mutated(body)))
    return method, version, params


def pairs() -> list[tuple[str, str]]:
    return [
        (method, version)
        for version in VERSIONS
        for method in sorted(MODERN_METHODS if version in w.MODERN_PROTOCOL_VERSIONS else HANDSHAKE_METHODS)
    ]


@pytest.mark.parametrize(("method", "version"), pairs())
def test_what_hosts_send_passes_without_the_sdk(method: str, version: str) -> None:
    params = template(method, version)
    assert sdk_answer(method, version, params) is None
    assert plainly_valid(method, version, params)


@GENERATED
@given(requests())
def test_our_check_answers_as_the_sdks_validator(request: tuple[str, str, Any]) -> None:
    method, version, params = request
    ours = our_answer(method, version, params)
    assert ours == sdk_answer(method, version, params)
    if plainly_valid(method, version, params):
        assert ours is None


@pytest.mark.parametrize(("method", "version"), pairs())
def test_every_single_edit_of_what_hosts_send_is_answered_as_the_sdk_answers(method: str, version: str) -> None:
    """Exhaustively: each member of the usual and the richer params replaced by each odd value,
    dropped, or joined by each known key; then our answer must be the SDK's."""
    checked = 0
    plain = template(method, version)
    bodies = [plain, *(enriched(plain, key) for key in RICHER if str(enriched(plain, key)) != str(plain))]
    if method in ("tools/call", "prompts/get", "resources/read"):
        bodies += [{**plain, key: RICHER[key]} for key in ("task", "inputResponses", "requestState")]
    for body in bodies:
        for path in paths(body):
            variants = [edited(body, path, 1, "", None)]
            variants += [edited(body, path, 0, "", odd) for odd in ODD]
            variants += [edited(body, path, 2, key, odd) for key in KEY_LIST for odd in ODD[::5]]
            for params in variants:
                assert our_answer(method, version, params) == sdk_answer(method, version, params), params
                checked += 1
    assert checked > 100


@pytest.mark.parametrize(
    ("method", "version"),
    [
        ("server/discover", "2025-11-25"),
        ("initialize", "2026-07-28"),
        ("tasks/nope", "2025-11-25"),
        ("x", "2026-07-28"),
    ],
)
def test_a_method_the_revision_lacks_is_not_found_as_the_sdk_says(method: str, version: str) -> None:
    assert our_answer(method, version, {}) == sdk_answer(method, version, {}) == (-32601, "Method not found", method)


def test_a_normal_sessions_checks_never_import_the_sdk_or_pydantic() -> None:
    """In a fresh interpreter: the params of initialize, tools/list and tools/call (both eras) are
    checked, and an unknown method refused, with neither ``mcp_types`` nor ``pydantic`` loaded; a bad
    one then loads them (so the probe can see an import when one happens)."""
    script = textwrap.dedent(
        f"""
        import sys
        from gatekeeper.proxy.session import HostSession
        from gatekeeper.proxy.host.params import check_params
        from gatekeeper.proxy.protocol.rpc import RpcError
        env = {ENVELOPE!r}
        check_params("initialize", "2025-11-25", {BODIES["initialize"]!r})
        check_params("tools/list", "2025-11-25", None)
        check_params("tools/call", "2025-11-25", {BODIES["tools/call"]!r})
        check_params("tools/list", "2026-07-28", {{"_meta": env}})
        check_params("tools/call", "2026-07-28", {{"_meta": env, **{BODIES["tools/call"]!r}}})
        try:
            check_params("tasks/list", "2026-07-28", {{}})
        except RpcError as exc:
            assert (exc.code, exc.data) == (-32601, "tasks/list")
        print(sorted(m for m in ("mcp", "mcp_types", "pydantic") if m in sys.modules))
        try:
            check_params("tools/call", "2025-11-25", {{"name": 5}})
        except RpcError as exc:
            print(exc.message)
        print(sorted(m for m in ("mcp_types", "pydantic") if m in sys.modules))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == [
        "[]",
        "invalid params for tools/call: params.name: Input should be a valid string",
        "['mcp_types', 'pydantic']",
    ]

"""hostera.Connection, a connection's era lock and handshake gate, answers request sequences as the SDK 2.3
server does: generated sequences (eras, half envelopes, initialize anywhere, notifications before the first
request) are sent to a real SDK server in memory, and each refusal must be the one ``Connection`` predicts."""

from __future__ import annotations

from typing import Any

import mcp_types
import mcp_types.methods
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gatekeeper.proxy.host import era as hostera
from gatekeeper.proxy.protocol import era as protocol_era
from gatekeeper.proxy.protocol import mcp as w
from tests.host_contract_support import ENVELOPE, VERSION_KEY
from tests.sdk_host_support import INITIALIZED, converse, fixed_results_server, hello
from tests.test_hostera import CALLS

Message = dict[str, Any]
RESULTS = {
    "tools/call": {"content": [], "resultType": "complete"},
    "tools/list": {"tools": [], "resultType": "complete"},
    "resources/list": {"resources": [], "resultType": "complete"},
    "resources/templates/list": {"resourceTemplates": [], "resultType": "complete"},
    "resources/read": {"contents": [], "resultType": "complete"},
    "prompts/list": {"prompts": [], "resultType": "complete"},
    "prompts/get": {"messages": [], "resultType": "complete"},
    "completion/complete": {"completion": {"values": []}, "resultType": "complete"},
}
ALL_CALLS: dict[str, Message] = {**CALLS, "ping": {}, "server/discover": {}, "logging/setLevel": {"level": "info"}}
ALL_CALLS |= {"resources/subscribe": {"uri": "x://y"}, "nope/nope": {}}


def oracle() -> Any:
    """A real SDK server with a handler for each method Gatekeeper serves (listen aside: it is a stream)."""
    server = fixed_results_server(RESULTS)

    async def set_level(ctx: Any, params: Any) -> dict[str, Any]:
        return {}

    server.add_request_handler("logging/setLevel", mcp_types.SetLevelRequestParams, set_level)
    return server


envelopes = st.sampled_from(["none", "full", "half"])
steps = st.one_of(
    st.tuples(st.just("request"), st.sampled_from(sorted(ALL_CALLS)), envelopes),
    st.tuples(st.just("initialize"), st.sampled_from(["2025-11-25", "2024-11-05", "1999-01-01"]), envelopes),
    st.tuples(st.just("initialized"), st.just(""), st.just("none")),
)


def message(n: int, step: tuple[str, str, str]) -> Message:
    kind, what, envelope = step
    if kind == "initialized":
        return INITIALIZED
    out: Message = hello(n, what) if kind == "initialize" else {"jsonrpc": "2.0", "id": n, "method": what}
    params: Message = dict(out["params"] if kind == "initialize" else ALL_CALLS[what])
    if envelope != "none":
        params["_meta"] = dict(ENVELOPE) if envelope == "full" else {VERSION_KEY: "2026-07-28"}
    out["params"] = params
    return out


def predicted(connection: hostera.Connection, request: Message) -> dict[str, Any] | None:
    """The error ``Connection`` says the request gets, or None when it is served."""
    method, params = request["method"], request["params"]
    routed = connection.route(method, params)
    if isinstance(routed, protocol_era.Rejection):
        return routed.error()
    refused = connection.gate(method)
    if refused is not None:
        return refused.error()
    if method == "initialize":
        connection.initialized(params["protocolVersion"])
    return None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(steps, min_size=1, max_size=6))
def test_request_sequences_are_admitted_or_refused_as_the_sdk_server_does(sequence: list[Any]) -> None:
    messages = [message(n, step) for n, step in enumerate(sequence)]
    answers = iter(converse(oracle(), messages))
    connection = hostera.Connection()
    for sent in messages:
        if "id" not in sent:
            connection.notified(sent["method"])
            continue
        answer, expected = next(answers), predicted(connection, sent)
        assert answer.get("error") == expected, (sent, answer)


def test_the_method_tables_are_the_sdks() -> None:
    for version in w.KNOWN_PROTOCOL_VERSIONS:
        defined = {method for method, at in mcp_types.methods.CLIENT_REQUESTS if at == version}
        modern = version in w.MODERN_PROTOCOL_VERSIONS
        assert defined == (hostera.MODERN_METHODS if modern else hostera.HANDSHAKE_METHODS), version


@pytest.mark.parametrize("before", [hostera.HELD_FRAMES - 1, hostera.HELD_FRAMES])
def test_notifications_before_the_first_request_are_held_up_to_eight(before: int) -> None:
    """``notifications/initialized`` after ``before`` others, then a request: the ninth frame is dropped."""
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
    messages = [progress] * before + [INITIALIZED, message(99, ("request", "tools/list", "none"))]
    answer = converse(oracle(), messages)[0]
    connection = hostera.Connection()
    for sent in messages[:-1]:
        connection.notified(sent["method"])
    assert answer.get("error") == predicted(connection, messages[-1])
    assert ("error" in answer) == (before == hostera.HELD_FRAMES)

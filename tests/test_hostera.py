"""proxy/host/era.py answers as the SDK 2.3 server does: its classifier, a real ``Server`` (Gatekeeper's
own, built by ``Proxy``, and one with fixed results), and the proxy's recorded answers are the oracles."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types.methods
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request

from gatekeeper import __version__
from gatekeeper.home import Home
from gatekeeper.proxy.host import era as hostera
from gatekeeper.proxy.protocol import era as protocol_era
from gatekeeper.proxy.protocol import mcp as w
from tests.host_contract_support import CAPS_KEY, INFO_KEY, MODERN, VERSION_KEY, normalised
from tests.sdk_host_support import (
    INITIALIZED,
    ask_gatekeepers_server,
    converse,
    fixed_results_server,
    hello,
    modern,
    request,
)
from tests.test_proxy_host_contract import CAPABILITIES, DISCOVERED, RUNGS, opened

pytestmark = pytest.mark.timeout(120)
SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def sdk_classify(params: Any) -> protocol_era.Envelope | protocol_era.Rejection:
    route = classify_inbound_request({"method": "tools/list", "params": params})
    if isinstance(route, InboundLadderRejection):
        return protocol_era.Rejection(route.code, route.message, route.data)
    return protocol_era.Envelope(route.protocol_version, route.client_info, route.client_capabilities)


# -- the envelope rungs and the era lock ----------------------------------------------------------------

_keys = st.sampled_from([VERSION_KEY, CAPS_KEY, INFO_KEY, w.LOG_LEVEL_META_KEY, "progressToken", "x"])
_values = st.one_of(
    st.sampled_from([MODERN, "2025-11-25", "", "2026-07-28 "]),
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=5),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.lists(st.integers(), max_size=2),
)
metas = st.one_of(_values, st.dictionaries(_keys, _values, max_size=5))
params_with_meta = st.one_of(
    st.none(),
    st.just({}),
    st.builds(lambda meta: {"_meta": meta}, metas),
    st.builds(lambda meta: {"name": "x", "_meta": meta}, metas),
)


@pytest.mark.parametrize(("name", "meta", "expected"), RUNGS, ids=[rung[0] for rung in RUNGS])
def test_each_recorded_rung_is_the_sdks_and_the_proxys(name: str, meta: Any, expected: dict[str, Any]) -> None:
    params = None if meta is None else {"_meta": meta}
    ours = protocol_era.classify(params)
    assert ours == sdk_classify(params)
    if isinstance(ours, protocol_era.Rejection):
        assert ours.error() == expected["error"]
    else:
        assert expected["error"]["code"] == w.METHOD_NOT_FOUND  # accepted; the proxy then has no 2026 ping


@given(params_with_meta)
def test_any_envelope_is_classified_as_the_sdk_classifies_it(params: Any) -> None:
    assert protocol_era.classify(params) == sdk_classify(params)


def _era_probe(params: Any) -> tuple[dict[str, Any], bool]:
    """The real server's answer to ``ping`` as a connection's first request, and whether that opened
    the modern era (a later ``initialize`` is then refused rather than answered)."""
    answers = converse(fixed_results_server({}), [request(1, "ping", params), hello("again")])
    return answers[0].get("error") or answers[0]["result"], "error" in answers[1]


@SLOW
@given(params_with_meta)
def test_the_first_request_locks_the_era_as_the_sdk_server_does(params: Any) -> None:
    first, opened_modern = _era_probe(params)
    assert hostera.opens_modern("ping", params) == opened_modern
    if opened_modern:
        route = protocol_era.classify(params)
        assert first == (route.error() if isinstance(route, protocol_era.Rejection) else _not_found("ping"))


def _not_found(method: str) -> dict[str, Any]:
    return {"code": w.METHOD_NOT_FOUND, "message": "Method not found", "data": method}


def test_initialize_never_opens_the_modern_era_even_with_an_envelope() -> None:
    enveloped = modern("init", "initialize", hello()["params"])
    assert not hostera.opens_modern("initialize", enveloped["params"])
    assert hostera.opens_modern("tools/list", enveloped["params"])
    answers = converse(fixed_results_server({}), [enveloped, INITIALIZED, modern("l", "tools/list")])
    assert answers[0]["result"]["protocolVersion"] == "2025-11-25"
    assert answers[1]["error"] == hostera.ENVELOPE_ON_LEGACY.error()


@pytest.mark.parametrize("version", ["2025-11-25", 7, None])
def test_initialize_on_a_modern_connection_is_the_sdks_refusal(version: Any) -> None:
    init = hello("i", version)
    if version is None:
        del init["params"]["protocolVersion"]
    answers = converse(fixed_results_server({}), [modern("first", "tools/list"), init])
    assert answers[1]["error"] == hostera.initialize_on_modern(init["params"]).error()


# -- the handshake and discover answers ----------------------------------------------------------------------


@pytest.mark.parametrize("version", [*w.HANDSHAKE_PROTOCOL_VERSIONS, "1999-01-01", "2026-07-28"])
def test_initialize_answers_as_gatekeepers_sdk_server(version: str, tmp_path: Path, home: Home) -> None:
    answer = ask_gatekeepers_server(tmp_path, home, [hello("init", version)])[0][0]
    assert answer["result"] == hostera.initialize_result(version, completions=False)
    assert hostera.negotiated_version(version) == answer["result"]["protocolVersion"]


def test_initialize_and_discover_are_the_proxys_recorded_answers(tmp_path: Path) -> None:
    """The recorded proxy had the notes server, which offers completions, behind it."""
    ours = normalised(hostera.initialize_result("2025-11-25", completions=True), tmp_path)
    assert ours == opened()["result"]
    assert ours["capabilities"] == CAPABILITIES
    assert normalised(hostera.discover_result(completions=True), tmp_path) == DISCOVERED


def test_discover_answers_as_gatekeepers_sdk_server(tmp_path: Path, home: Home) -> None:
    answers, server = ask_gatekeepers_server(tmp_path, home, [modern("d", "server/discover")])
    assert server.instructions == hostera.INSTRUCTIONS
    answer = answers[0]
    assert answer["result"] == hostera.discover_result(completions=False)


def test_the_serverinfo_and_cacheable_methods_are_the_sdks() -> None:
    assert hostera.CACHEABLE_METHODS == mcp_types.methods.CACHEABLE_METHODS
    assert protocol_era.server_info() == {"name": "gatekeeper", "version": __version__}
    info = protocol_era.server_info()
    info["name"] = "changed"
    assert protocol_era.server_info()["name"] == "gatekeeper"  # a fresh dict each time


# -- per-era result shaping ---------------------------------------------------------------------------------

TEXT = [{"type": "text", "text": "hello"}]
HAND_OFF = {
    "resultType": "input_required",
    "inputRequests": {
        "gatekeeper_review": {
            "method": "elicitation/create",
            "params": {"mode": "url", "message": "Approve it", "url": "https://example.test/p/1"},
        }
    },
    "requestState": "state",
}
CALLS: dict[str, dict[str, Any]] = {
    "tools/list": {},
    "tools/call": {"name": "t", "arguments": {}},
    "resources/list": {},
    "resources/templates/list": {},
    "resources/read": {"uri": "x://y"},
    "prompts/list": {},
    "prompts/get": {"name": "p"},
    "completion/complete": {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": ""}},
}
# Results as Gatekeeper's handlers build them (wire dicts; the 2026 surface needs resultType on these).
RESULTS: list[tuple[str, dict[str, Any]]] = [
    ("tools/call", {"content": TEXT, "isError": True, "resultType": "complete"}),
    (
        "tools/call",
        {"content": TEXT, "structuredContent": {"result": "x"}, "resultType": "complete", "_meta": {"k": 1}},
    ),
    (
        "tools/list",
        {"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "nextCursor": "2", "resultType": "complete"},
    ),
    ("tools/list", {"tools": [], "ttlMs": 5, "cacheScope": "public", "resultType": "complete"}),
    ("resources/list", {"resources": [{"uri": "x://y", "name": "y"}], "resultType": "complete"}),
    (
        "resources/templates/list",
        {"resourceTemplates": [{"uriTemplate": "x://{a}", "name": "a"}], "resultType": "complete"},
    ),
    ("resources/read", {"contents": [{"uri": "x://y", "text": "t"}], "resultType": "complete"}),
    ("prompts/list", {"prompts": [{"name": "p"}], "resultType": "complete"}),
    ("prompts/get", {"messages": [{"role": "user", "content": TEXT[0]}], "resultType": "complete"}),
    ("completion/complete", {"completion": {"values": ["a"]}, "resultType": "complete"}),
]
MODELS: list[tuple[str, Any]] = [
    ("tools/call", mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="x")], is_error=True)),
    ("tools/list", mcp_types.ListToolsResult(tools=[mcp_types.Tool(name="t", input_schema={"type": "object"})])),
    ("resources/read", mcp_types.ReadResourceResult(contents=[])),
    ("completion/complete", mcp_types.CompleteResult(completion=mcp_types.Completion(values=[]))),
]


def sdk_shaped(method: str, version: str, result: Any) -> dict[str, Any]:
    """What the real SDK server sends a host at ``version`` for a handler's ``result``."""
    server = fixed_results_server({method: result})
    if version in w.MODERN_PROTOCOL_VERSIONS:
        answers = converse(server, [modern("r", method, CALLS[method])])
    else:
        answers = converse(server, [hello("init", version), INITIALIZED, request("r", method, CALLS[method])])
    result_dict: dict[str, Any] = answers[-1]["result"]
    return result_dict


def _dumped(result: Any) -> dict[str, Any]:
    if isinstance(result, dict):
        return copy.deepcopy(result)
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


@pytest.mark.parametrize("version", [*w.HANDSHAKE_PROTOCOL_VERSIONS, MODERN])
@pytest.mark.parametrize(("method", "result"), RESULTS + MODELS, ids=lambda value: str(value)[:40])
def test_results_are_shaped_for_each_era_as_the_sdk_shapes_them(method: str, result: Any, version: str) -> None:
    given_result = _dumped(result)
    assert hostera.shape_result(method, version, given_result) == sdk_shaped(method, version, result)
    assert given_result == _dumped(result)  # the handler's own dict is not changed


def test_a_hand_off_gets_no_cache_hints_but_the_stamp() -> None:
    for method in ("tools/call", "resources/read"):
        assert hostera.shape_result(method, MODERN, HAND_OFF) == sdk_shaped(method, MODERN, HAND_OFF)


def test_a_2026_result_without_a_result_type_is_completed_not_refused() -> None:
    """The SDK refuses such a dict (-32603: the 2026 surface requires it); ours fills in what its model
    would have, the same answer a handler returning the SDK's model gets."""
    bare = {"content": TEXT}
    shaped = hostera.shape_result("tools/call", MODERN, bare)
    assert shaped == {**sdk_shaped("tools/call", MODERN, {**bare, "resultType": "complete"})}
    assert (
        "error"
        in converse(fixed_results_server({"tools/call": bare}), [modern("r", "tools/call", CALLS["tools/call"])])[0]
    )


_meta_values = st.one_of(
    st.none(), st.integers(), st.text(max_size=4), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)
tool_results = st.fixed_dictionaries(
    {"content": st.lists(st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=8)), max_size=2)},
    optional={
        "isError": st.booleans(),
        "_meta": st.one_of(
            st.none(),
            st.dictionaries(st.sampled_from(["k", "progressToken", w.SERVER_INFO_META_KEY]), _meta_values, max_size=3),
        ),
    },
)


@SLOW
@given(tool_results, st.sampled_from(["2025-11-25", MODERN]))
def test_generated_tool_results_are_shaped_as_the_sdk_shapes_them(result: dict[str, Any], version: str) -> None:
    result = {**result, "resultType": "complete"}
    try:
        expected = sdk_shaped("tools/call", version, result)
    except KeyError:  # the SDK refused the result itself (-32603): not a shape Gatekeeper builds
        return
    assert hostera.shape_result("tools/call", version, result) == expected


def test_the_new_host_side_modules_load_no_sdk_pydantic_or_store() -> None:
    """What they exist for: the proxy can load them before (or without) the SDK."""
    code = (
        "import sys, gatekeeper.proxy.host.era, gatekeeper.proxy.host.parse, gatekeeper.proxy.host.dispatch; "
        "print(' '.join(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert not {"mcp", "mcp_types", "pydantic", "sqlalchemy", "httpx2", "yaml"} & set(out)
    assert "orjson" in out and "anyio" in out

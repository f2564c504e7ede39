"""Pin digests from raw tool dicts (proxy/tooldef.py) equal the SDK model's, both ways.

The pin has always been ``canonical_json(Tool.model_validate(raw).model_dump(mode="json",
by_alias=True, exclude_none=True))``; every pin in every store was made with it. Here the real
listings of the bundled notes server, the probe server, the npm filesystem server, mcp-server-git
(both eras) and the 1.x-SDK notes server, taken raw by our client and as models by the SDK client,
digest the same; and generated variants of them (unknown keys, nulls, lax booleans, odd icons,
wrong types) get the SDK model's dump or its refusal.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_types import Tool
from pydantic import ValidationError

from gatekeeper.canonical import canonical_json, sha256_hex
from gatekeeper.proxy.tooldef import Unsure, plain_dump, tool_definition, tool_dump
from tests.childrpc_support import dump, lean, peer, sdk
from tests.peers.listings import RECORDED

LISTED = [(name, mode) for name in ("notes", "probe", "fs", "git") for mode in ("auto", "legacy")] + [("old", "legacy")]


def sdk_definition(tool: Tool) -> tuple[str, str]:
    """What proxy/catalog.py pinned with the SDK client's models (its ``definition``)."""
    text = canonical_json(tool.model_dump(mode="json", by_alias=True, exclude_none=True), allow_floats=True)
    return sha256_hex(text.encode("utf-8")), text


async def _listings(tmp: Path) -> dict[str, tuple[list[dict[str, Any]], list[Tool], str]]:
    listed = {}
    for name, mode in LISTED:
        params = peer(name, tmp / name)
        async with lean(params, tmp / name, mode) as (session, negotiated, _):
            raw = (await session.request("tools/list"))["tools"]
        async with sdk(params, tmp / name, mode) as client:
            tools = (await client.list_tools()).tools
        listed[f"{name}-{mode}"] = (raw, tools, negotiated.protocol_version)
    return listed


@pytest.fixture(scope="module")
def listings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[list[dict[str, Any]], list[Tool], str]]:
    """Each real server's tools, raw and as the SDK client's models, listed once for the module."""
    return anyio.run(_listings, tmp_path_factory.mktemp("peers"))


@pytest.mark.slow
def test_real_listings_digest_the_same_both_ways(listings: dict[str, Any]) -> None:
    seen = 0
    for key, (raw, tools, version) in listings.items():
        assert [t["name"] for t in raw] == [t.name for t in tools], key
        for one, model in zip(raw, tools, strict=True):
            assert tool_definition(one, version) == sdk_definition(model), (key, one["name"])
            assert plain_dump(one) == dump(model), (key, one["name"])  # without the SDK's model
            seen += 1
    assert seen > 40  # notes 7, probe 10, fs ~14, git ~12, old 3, twice over for the first four
    fs_tools = {t["name"]: t for t in listings["fs-legacy"][0]}
    assert fs_tools["write_file"]["annotations"]["destructiveHint"] is True  # nested models were in play


LAX = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from(
        ["true", "false", "yes", "no", "1", "0", "on", "off", "light", "dark", "required", "forbidden", ""]
    ),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
ANNOTATION_KEYS = ["title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint", "read_only_hint", "x"]
ICON_KEYS = ["src", "mimeType", "sizes", "theme", "mime_type", "x"]
NESTED = {
    "annotations": st.dictionaries(st.sampled_from(ANNOTATION_KEYS), LAX | st.booleans(), max_size=4) | LAX,
    "icons": st.lists(st.dictionaries(st.sampled_from(ICON_KEYS), LAX | st.text(max_size=4), max_size=4), max_size=2)
    | LAX,
    "execution": st.dictionaries(st.sampled_from(["taskSupport", "x"]), LAX | st.sampled_from(["optional"])) | LAX,
}
TOP_KEYS = ["name", "title", "description", "inputSchema", "outputSchema", "_meta", "input_schema", "meta", "extra"]


@st.composite
def variants(draw: st.DrawFn, bases: list[dict[str, Any]]) -> dict[str, Any]:
    tool: dict[str, Any] = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from([*TOP_KEYS, *NESTED]))
        if key in NESTED:
            tool[key] = draw(NESTED[key])
        elif draw(st.booleans()):
            tool.pop(key, None)
        else:
            tool[key] = draw(LAX | JSONISH | st.text(max_size=6))
    return tool


def check_both_ways(raw: dict[str, Any]) -> bool:
    """The same dump (compared as canonical text: 1 and true differ there) or the same refusal.
    True if the plain path decided it alone."""
    try:
        expected = Tool.model_validate(raw, by_name=False).model_dump(mode="json", by_alias=True, exclude_none=True)
    except ValidationError:
        with pytest.raises(ValidationError):
            tool_dump(raw)
        return False
    text = canonical_json(expected, allow_floats=True)
    assert tool_definition(raw) == (sha256_hex(text.encode("utf-8")), text)
    try:
        return canonical_json(plain_dump(raw), allow_floats=True) == text
    except Unsure:
        return False


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_variants_of_real_tools_digest_as_the_sdk_model(
    listings: dict[str, Any], data: st.DataObject
) -> None:
    bases = [tool for raw, _, _ in listings.values() for tool in raw]
    check_both_ways(data.draw(variants(bases)))


RECORDINGS = {p.stem: json.loads(p.read_text()) for p in sorted(RECORDED.glob("*.json"))}


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_recorded_real_listings_digest_the_same_both_ways(name: str) -> None:
    """The recorded listings (tests/peers/listings: with server-everything's, an HTTP peer) without a
    peer running; each one decided by the plain path alone."""
    for raw in RECORDINGS[name]:
        assert check_both_ways(raw), raw["name"]


@settings(max_examples=300, deadline=None)
@given(raw=variants([tool for tools in RECORDINGS.values() for tool in tools]))
def test_generated_variants_of_recorded_tools_digest_as_the_sdk_model(raw: dict[str, Any]) -> None:
    check_both_ways(raw)


BASE = {
    "name": "write_file",
    "title": "Write",
    "description": "Write a file.",
    "inputSchema": {"type": "object", "properties": {"path": {"type": "string", "default": None}}, "required": []},
    "outputSchema": {"type": "object", "properties": {"n": {"type": "number", "minimum": 0.5}}},
    "annotations": {"title": "W", "readOnlyHint": False, "destructiveHint": True, "openWorldHint": None},
    "icons": [{"src": "https://x/i.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"}],
    "execution": {"taskSupport": "optional"},
    "_meta": {"k": None, "big": 12345678901234567890123, "f": 1.5},
}


@settings(max_examples=300, deadline=None)
@given(raw=variants([BASE]))
def test_generated_variants_of_a_full_tool_digest_as_the_sdk_model(raw: dict[str, Any]) -> None:
    check_both_ways(raw)


def test_the_plain_path_decides_the_usual_shapes_and_leaves_lax_ones_to_the_model() -> None:
    assert check_both_ways(BASE)  # every field in play, nulls inside objects kept, nulls in models dropped
    assert plain_dump({**BASE, "extra": 1, "outputSchema": None})["annotations"] == {
        "title": "W",
        "readOnlyHint": False,
        "destructiveHint": True,
    }
    lax = {**BASE, "annotations": {"readOnlyHint": "yes"}}
    with pytest.raises(Unsure):
        plain_dump(lax)
    assert tool_dump(lax)["annotations"] == {"readOnlyHint": True}  # pydantic's lax rule, from the model
    with pytest.raises(ValidationError):
        tool_dump({**BASE, "name": 3})

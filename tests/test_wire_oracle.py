"""The lean line parse (proxy/host/parse.py) and the SDK-model one (proxy/host/oracle.py) answer every line alike:
the same message, or the same refusal (reason, code, message, id, method, size)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gatekeeper.proxy.host import oracle as wire
from gatekeeper.proxy.host import parse as wireparse
from tests.test_proxy_wire import ENVELOPE, HOSTILE, INIT, malformed_inputs

GENERATED = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOOLS_CALL = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 42,
        "method": "tools/call",
        "params": {"name": "notes__read_note", "arguments": {"path": "notes/hello.md"}, "_meta": {"progressToken": 7}},
    }
).encode()
TYPICAL = [
    TOOLS_CALL,
    json.dumps(INIT).encode(),
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
    b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","reason":"x"}}',
    json.dumps({"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {"_meta": ENVELOPE}}).encode(),
    b'{"jsonrpc":"2.0","id":"r","result":{"roots":[]}}',
    b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found","data":"x"}}',
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}',
    b'{"id":-5,"method":"ping","jsonrpc":"2.0"}',
]
ODD = [
    b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":NaN}}',
    b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":-Infinity}}',
    b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":1e400}}',
    b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":123456789012345678901234567890}}',
    b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"m"}',
    b'{"jsonrpc":"2.0","id":1,"id":"two","method":"m"}',
    b'{"jsonrpc":"2.0","id":1,"method":"m","extra":true}',
    b'{"jsonrpc":"2.0","id":1,"method":"m","params":null}',
    b'{"jsonrpc":"2.0","method":"m","id":null}',
    b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}',
    b'{"jsonrpc":"2.0","id":true,"error":{"code":1,"message":"x"}}',
    b'{"jsonrpc":"2.0","id":1.5,"error":{"code":1,"message":"x"}}',
    b'{"jsonrpc":"2.0","id":1,"result":[]}',
    b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":5}}',
    b'{"jsonrpc":"2.0","id":1,"error":{"code":true,"message":"x"}}',
    b'{"jsonrpc":"2.0","id":1,"error":{"message":"x"}}',
    b'{"jsonrpc":"2.0","id":1,"error":[]}',
    b'{"jsonrpc":"2.0","id":1,"result":"ok"}',
    b'{"jsonrpc":"2.0","id":null,"result":{}}',
    b'{"jsonrpc":"2.0","id":1,"error":{"code":1.0,"message":"x"}}',
    b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x","more":1}}',
    b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * 150 + b"]" * 150 + b"}",
    b'{"jsonrpc":"2.0","id":1,"result":{"a":' + b"[" * 150 + b"]" * 150 + b"}}",
    b'{"jsonrpc":"2.0","id":1,"result":{"a":' + b"[" * 99 + b"]" * 99 + b"}}",
    b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":' + b"[" * 98 + b"]" * 98 + b"}}",
    b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":' + b"[" * 99 + b"]" * 99 + b"}}",
    b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"' + b"[" * 300 + b'"}}',
    b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\x01\x1f"}}',
    b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\\u0000\\ud83d\\ude00"}}',
    b' {"jsonrpc":"2.0","id":1,"method":"m"} ',
    b'{"jsonrpc":"2.0","id":-0,"method":"m","params":{"f":-0.0,"e":1E2,"g":0.1}}',
]
CORPUS = TYPICAL + ODD + malformed_inputs() + [line for line, *_ in HOSTILE]


def canonical(outcome: Any) -> Any:
    """A refusal as it is; a message as text, so 1 and 1.0, True and 1, NaN and NaN compare as they should."""
    return outcome if isinstance(outcome, wire.Refusal) else json.dumps(outcome, sort_keys=True)


def old_parse(line: bytes, **limits: Any) -> Any:
    outcome = wire.parse(line, **limits)
    if isinstance(outcome, wire.Refusal):
        return outcome
    return outcome.model_dump(by_alias=True, exclude_unset=True)


def agree(line: bytes, **limits: Any) -> None:
    assert canonical(wireparse.parse(line, **limits)) == canonical(old_parse(line, **limits)), line[:200]


def test_the_limits_are_wires() -> None:
    assert wireparse.MIN_LINE_BYTES == wire.MIN_LINE_BYTES  # MAX_DEPTH: wire takes wireparse's


@pytest.mark.parametrize("index", range(len(CORPUS)))
def test_each_corpus_line_is_answered_alike(index: int) -> None:
    agree(CORPUS[index])


@pytest.mark.parametrize("line", [TOOLS_CALL, TYPICAL[1], b"not json", b'{"jsonrpc":"2.0","id":1,"method":"m"}'])
def test_a_line_over_the_limit_is_answered_alike(line: bytes) -> None:
    agree(line, limit=10)
    agree(line[:5], size=len(line) + 10**6, limit=len(line))


def test_ordinary_lines_never_need_the_oracle() -> None:
    for line in TYPICAL:
        assert wireparse.quick(line) is not None, line


def test_the_lean_parse_does_not_import_the_sdk() -> None:
    code = "import sys, gatekeeper.proxy.host.parse as p; p.parse(sys.argv[1].encode()); print(sorted(sys.modules))"
    modules = subprocess.run(
        [sys.executable, "-c", code, TOOLS_CALL.decode()], capture_output=True, text=True, check=True
    ).stdout
    assert "pydantic" not in modules and "mcp_types" not in modules


json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.sampled_from(["\ud800", "\udc80x", "\x00", "\u2028", "é"]),
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12,
)
ids = st.one_of(st.integers(min_value=-(2**66), max_value=2**66), st.text(max_size=4), json_leaves, json_values)
members = {
    "jsonrpc": st.one_of(st.just("2.0"), json_leaves),
    "id": ids,
    "method": st.one_of(st.sampled_from(["tools/call", "ping", "notifications/cancelled"]), json_leaves),
    "params": st.one_of(st.dictionaries(st.text(max_size=5), json_values, max_size=4), json_values),
    "result": st.one_of(st.dictionaries(st.text(max_size=5), json_values, max_size=3), json_values),
    "error": st.one_of(
        st.fixed_dictionaries(
            {"code": st.one_of(st.integers(), json_leaves), "message": st.one_of(st.text(max_size=5), json_leaves)},
            optional={"data": json_values, "x": json_values},
        ),
        json_values,
    ),
    "extra": json_values,
}
KINDS = [("jsonrpc", "id", "method", "params"), ("jsonrpc", "method", "params"), ("jsonrpc", "id", "method")]
KINDS += [("jsonrpc", "method"), ("jsonrpc", "id", "result"), ("jsonrpc", "id", "error")]
PLAIN = {
    "jsonrpc": st.just("2.0"),
    "id": st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.text(max_size=4)),
    "method": st.text(max_size=8),
    "params": st.dictionaries(st.text(max_size=5), json_values, max_size=4),
    "result": st.dictionaries(st.text(max_size=5), json_values, max_size=3),
    "error": st.fixed_dictionaries({"code": st.integers(-(2**31), 2**31), "message": st.text(max_size=5)}),
}


def _shaped(kind: tuple[str, ...], odd: str | None) -> st.SearchStrategy[dict[str, Any]]:
    """A valid message of one kind, with at most one member (``odd``) drawn from anything at all."""
    chosen = {key: (members[key] if key == odd else PLAIN[key]) for key in kind}
    if odd is not None and odd not in kind:
        chosen[odd] = members[odd]
    return st.fixed_dictionaries(chosen)


shaped = st.tuples(st.sampled_from(KINDS), st.one_of(st.none(), st.sampled_from(sorted(members)))).flatmap(
    lambda pair: _shaped(*pair)
)
messages = st.one_of(
    shaped,
    st.sets(st.sampled_from(sorted(members)), max_size=5).flatmap(
        lambda keys: st.fixed_dictionaries({key: members[key] for key in sorted(keys)})
    ),
)


@GENERATED
@given(messages, st.booleans())
@example({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"x": 2**64}}, False)
def test_generated_messages_are_answered_alike(message: dict[str, Any], ascii_only: bool) -> None:
    agree(json.dumps(message, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))


@GENERATED
@given(messages, st.data())
def test_damaged_lines_are_answered_alike(message: dict[str, Any], data: st.DataObject) -> None:
    line = json.dumps(message).encode()
    cut = data.draw(st.integers(min_value=0, max_value=len(line)))
    noise = data.draw(st.binary(max_size=3))
    agree(line[:cut] + noise + line[cut + data.draw(st.integers(min_value=0, max_value=3)) :])

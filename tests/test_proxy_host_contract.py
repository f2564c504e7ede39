"""The proxy's answers to a raw JSON-RPC host, frozen as today's proxy (the MCP SDK server inside) gives them.

Issue 12 replaces the SDK on the proxy's host side with our own JSON-RPC code; this contract holds
the rewrite to the answers hosts see now. Each case drives a fresh proxy (in front of the bundled
notes server and the probe server) with raw lines and compares everything it wrote to stdout with a
literal transcript. Placeholders stand only for what varies per run: ``<version>`` for Gatekeeper's
version in ``serverInfo`` and ``<tmp>`` for the test's folder. Answers are compared as parsed JSON
(key order and spacing are not part of the contract; values, codes and texts are).

Recorded at b2b423a (mcp 2.3.0). Where a case records something surprising, its comment says so:
that is today's behaviour, kept on purpose until someone decides otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.home import Home
from tests.host_contract_support import (
    CAPS_KEY,
    INFO_KEY,
    MODERN,
    STAMP_KEY,
    SUBSCRIPTION_KEY,
    VERSION_KEY,
    Answer,
    Case,
    File,
    Notice,
    Send,
    Step,
    answer,
    error,
    handshake,
    initialize,
    modern,
    notification,
    play,
    raw_proxy,
    request,
)

pytestmark = pytest.mark.timeout(120)

SERVER_INFO = {"name": "gatekeeper", "version": "<version>"}
STAMP = {STAMP_KEY: SERVER_INFO}
INSTRUCTIONS = (
    "Gatekeeper guards writes: tools marked [Gatekeeper] only propose a file, which a person approves or "
    "rejects on the review page. Use gatekeeper_proposal_status to follow one."
)
CAPABILITIES = {
    "completions": {},
    "logging": {},
    "prompts": {"listChanged": True},
    "resources": {"listChanged": True, "subscribe": False},
    "tools": {"listChanged": True},
}
DISCOVERED = {
    "supportedVersions": [MODERN],
    "capabilities": {**CAPABILITIES, "resources": {"listChanged": True, "subscribe": True}},
    "instructions": INSTRUCTIONS,
    "ttlMs": 0,
    "cacheScope": "private",
    "resultType": "complete",
    "_meta": STAMP,
}
PROPOSES = (
    "[Gatekeeper] Calling this tool does not write anything: it records a proposal of the exact file, and a "
    "person must approve it on the review page before the file is created. The result gives the proposal id; "
    "check it later with gatekeeper_proposal_status.\n\n"
)


def _schema(title: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A JSON schema as the SDK's tool decorator writes it (the keys an own implementation must keep)."""
    schema: dict[str, Any] = {"properties": properties, "type": "object", "title": title}
    if required is not None:
        schema["required"] = required
    return schema


def _string(title: str, **more: Any) -> dict[str, Any]:
    return {"title": title, "type": "string", **more}


def _returns(tool: str) -> dict[str, Any]:
    return _schema(f"{tool}Output", {"result": _string("Result")}, ["result"])


TOOLS = [
    {
        "name": "notes__read_note",
        "description": "Read one note by its relative path, e.g. notes/hello.md.",
        "inputSchema": _schema("read_noteArguments", {"path": _string("Path")}, ["path"]),
        "outputSchema": _returns("read_note"),
    },
    {
        "name": "notes__create_note",
        "description": PROPOSES + "Create a new note notes/<slug of title>.md with the given body.",
        "inputSchema": _schema(
            "create_noteArguments", {"title": _string("Title"), "body": _string("Body")}, ["title", "body"]
        ),
    },
    {
        "name": "probe__sleep_then_touch",
        "description": "Sleep, then create the marker file; a cancelled call never creates it. The optional "
        "`started` file is created when the call begins, `cancelled` when its handler is cancelled.",
        "inputSchema": _schema(
            "sleep_then_touchArguments",
            {
                "marker": _string("Marker"),
                "seconds": {"default": 2.0, "title": "Seconds", "type": "number"},
                "started": _string("Started", default=""),
                "cancelled": _string("Cancelled", default=""),
            },
            ["marker"],
        ),
        "outputSchema": _returns("sleep_then_touch"),
    },
    {
        "name": "probe__grow",
        "description": "Add a tool named `extra` and tell the client the list changed.",
        "inputSchema": _schema("growArguments", {}),
        "outputSchema": _returns("grow"),
    },
    {
        "name": "gatekeeper_proposal_status",
        "title": "Gatekeeper: proposal status",
        "description": "Report a Gatekeeper proposal's status (pending, approved, rejected with the reviewer's "
        "reason, committed with the final path, conflict, refused, failed, expired). Read-only.",
        "inputSchema": {
            "properties": {"proposal_id": {"type": "string", "description": "The id a proposing call returned."}},
            "required": ["proposal_id"],
            "type": "object",
            "additionalProperties": False,
        },
        "annotations": {"destructiveHint": False, "idempotentHint": True, "readOnlyHint": True},
    },
]


def opened(version: str = "2025-11-25", rid: Any = "init") -> dict[str, Any]:
    """The answer to a legacy host's ``initialize`` that negotiated ``version``."""
    result = {
        "protocolVersion": version,
        "capabilities": CAPABILITIES,
        "serverInfo": SERVER_INFO,
        "instructions": INSTRUCTIONS,
    }
    return answer(rid, result)


def not_found(rid: Any, method: str) -> dict[str, Any]:
    return error(rid, -32601, "Method not found", method)


def bad_params(rid: Any, method: str, detail: str) -> dict[str, Any]:
    return error(rid, -32602, f"invalid params for {method}: {detail}")


def slow_sdk_call(rid: Any, seconds: float) -> dict[str, Any]:
    """A slow allowed call the fast path leaves to the SDK server today: a 20-digit number in its
    ``_meta`` (orjson would round it). The probe writes ``<tmp>/started`` and, if its handler is
    cancelled, ``<tmp>/cancelled``."""
    names = {"marker": "done", "started": "started", "cancelled": "cancelled"}
    arguments: dict[str, Any] = {key: f"<tmp>/{name}" for key, name in names.items()}
    params = {"name": "probe__sleep_then_touch", "arguments": {**arguments, "seconds": seconds}}
    return request(rid, "tools/call", {**params, "_meta": {"big": 12345678901234567890}})


def text_result(text: str) -> dict[str, Any]:
    """A tool's plain result as the probe's SDK tools return it, through the proxy."""
    return {"content": [{"type": "text", "text": text}], "structuredContent": {"result": text}, "isError": False}


# A call the probe answers first: its server is up, and the proxy's own listen stream toward it (a 2026
# child sends list_changed only on one) went out before the call that makes the list change.
_WARM = {"name": "probe__sleep_then_touch", "arguments": {"marker": "<tmp>/warm", "seconds": 0}}
WARM_UP_2025: list[Step] = [Send(request("w", "tools/call", _WARM)), Answer("w")]
WARM_UP_2026: list[Step] = [Send(modern("w", "tools/call", _WARM)), Answer("w")]
# Opens the 2026 era (its first request carries the envelope); ping is not a 2026 method, hence -32601.
MODERN_PING: list[Step] = [Send(modern("first", "ping")), Answer("first")]
ENVELOPE_MESSAGE = (
    "params._meta must be an object carrying the required 'io.modelcontextprotocol/protocolVersion' and "
    "'io.modelcontextprotocol/clientCapabilities' envelope keys"
)
MISSING = "params._meta is missing the required envelope key(s): "
HANDSHAKE_ONLY = "this connection serves the handshake protocol era; requests carrying the 2026-07-28 envelope"
HANDSHAKE_ONLY += " are not accepted on it"
NO_HANDSHAKE = "connection is serving the 2026-07-28 protocol; the initialize handshake is not accepted"
STATUS = "invalid params for logging/setLevel: params.level: Input should be 'alert', 'critical', 'debug', "
LEVELS = "'emergency', 'error', 'info', 'notice' or 'warning'"

CASES: dict[str, Case] = {
    "initialize-2025-11-25-then-ping": Case(
        [*handshake(), Send(request("p", "ping")), Answer("p")], [opened(), answer("p", {})]
    ),
    "initialize-2024-11-05": Case(handshake("2024-11-05"), [opened("2024-11-05")]),
    "initialize-unknown-version-negotiates-2025-11-25": Case(handshake("1999-01-01"), [opened()]),
    "initialize-version-not-a-string": Case(
        [Send(initialize("init", 7)), Answer("init")],
        [bad_params("init", "initialize", "params.protocolVersion: Input should be a valid string")],
    ),
    "initialize-twice-answers-both": Case(
        [*handshake(), Send(initialize("again", "2024-11-05")), Answer("again")],
        [opened(), opened("2024-11-05", "again")],
    ),
    "no-initialized-notification-needed": Case(
        [
            Send(initialize("init")),
            Answer("init"),
            Send(request("s", "logging/setLevel", {"level": "info"})),
            Answer("s"),
        ],
        [opened(), answer("s", {})],
    ),
    "server-discover": Case([Send(modern("d", "server/discover")), Answer("d")], [answer("d", DISCOVERED)]),
    "server-discover-without-envelope": Case(
        [Send(request("d", "server/discover")), Answer("d")], [not_found("d", "server/discover")]
    ),
    "tools-list-2025": Case(
        [*handshake(), Send(request("l", "tools/list")), Answer("l")], [opened(), answer("l", {"tools": TOOLS})]
    ),
    "tools-list-2026": Case(
        [Send(modern("l", "tools/list")), Answer("l")],
        [answer("l", {"tools": TOOLS, "ttlMs": 0, "cacheScope": "private", "resultType": "complete", "_meta": STAMP})],
    ),
    "requests-before-initialize": Case(
        [
            Send(request("l", "tools/list")),
            Answer("l"),
            Send(request("c", "tools/call", {"name": "notes__read_note", "arguments": {"path": "x"}})),
            Answer("c"),
        ],
        [error("l", -32602, "Invalid request parameters", ""), error("c", -32602, "Invalid request parameters", "")],
    ),
    "ping-before-initialize": Case([Send(request("p", "ping")), Answer("p")], [answer("p", {})]),
    "unknown-method-2025": Case(
        [
            *handshake(),
            Send(request("u", "nope/nope")),
            Answer("u"),
            Send(request("s", "resources/subscribe", {"uri": "x://y"})),  # a spec method the proxy does not serve
            Answer("s"),
        ],
        [opened(), not_found("u", "nope/nope"), not_found("s", "resources/subscribe")],
    ),
    "unknown-method-2026": Case([Send(modern("u", "nope/nope")), Answer("u")], [not_found("u", "nope/nope")]),
    "bad-tools-call-params-2025": Case(
        [
            *handshake(),
            Send(request("b1", "tools/call", {"name": 42})),
            Answer("b1"),
            Send(request("b2", "tools/call", {"name": "notes__read_note", "arguments": "x"})),
            Answer("b2"),
            Send(request("b3", "tools/call", {})),
            Answer("b3"),
        ],
        [
            opened(),
            bad_params("b1", "tools/call", "params.name: Input should be a valid string"),
            bad_params("b2", "tools/call", "params.arguments: Input should be a valid dictionary"),
            bad_params("b3", "tools/call", "params.name: Field required"),
        ],
    ),
    "bad-tools-call-params-2026": Case(
        [Send(modern("b", "tools/call", {"name": 42})), Answer("b")],
        [bad_params("b", "tools/call", "params.name: Input should be a valid string")],
    ),
    "envelope-on-a-2025-connection": Case(
        [*handshake(), Send(modern("e", "tools/list")), Answer("e")], [opened(), error("e", -32600, HANDSHAKE_ONLY)]
    ),
    "initialize-on-a-2026-connection": Case(
        [*MODERN_PING, Send(initialize("i")), Answer("i"), Send(initialize("j", 7)), Answer("j")],
        [
            not_found("first", "ping"),
            error("i", -32022, NO_HANDSHAKE, {"supported": [MODERN], "requested": "2025-11-25"}),
            error("j", -32022, NO_HANDSHAKE, {"supported": [MODERN]}),  # no "requested" for a non-string
        ],
    ),
    "half-an-envelope-opens-the-2026-era": Case(
        [Send(request("h", "ping", {"_meta": {VERSION_KEY: MODERN}})), Answer("h")],
        [error("h", -32602, MISSING + CAPS_KEY)],
    ),
    "logging-set-level-2025": Case(
        [
            *handshake(),
            Send(request("s", "logging/setLevel", {"level": "warning"})),
            Answer("s"),
            Send(request("t", "logging/setLevel", {"level": "loud"})),
            Answer("t"),
        ],
        [opened(), answer("s", {}), error("t", -32602, STATUS + LEVELS)],
    ),
    "logging-set-level-is-not-a-2026-method": Case(
        [Send(modern("s", "logging/setLevel", {"level": "warning"})), Answer("s")],
        [not_found("s", "logging/setLevel")],
    ),
    "list-changed-2025": Case(
        [
            *handshake(),
            *WARM_UP_2025,
            Send(request("g", "tools/call", {"name": "probe__grow", "arguments": {}})),
            Answer("g"),
            Notice("notifications/tools/list_changed"),
        ],
        [
            opened(),
            answer("w", text_result("touched")),
            answer("g", text_result("grown")),
            notification("notifications/tools/list_changed"),
        ],
        any_order=True,
    ),
    "subscriptions-listen-ack-then-list-changed": Case(
        [
            *WARM_UP_2026,
            Send(modern("sub", "subscriptions/listen", {"notifications": {"toolsListChanged": True}})),
            Notice("notifications/subscriptions/acknowledged"),
            Send(modern("g", "tools/call", {"name": "probe__grow", "arguments": {}})),
            Answer("g"),
            Notice("notifications/tools/list_changed"),
        ],
        [
            answer("w", {**text_result("touched"), "resultType": "complete", "_meta": STAMP}),
            notification(
                "notifications/subscriptions/acknowledged",
                {"notifications": {"toolsListChanged": True}, "_meta": {SUBSCRIPTION_KEY: "sub"}},
            ),
            answer("g", {**text_result("grown"), "resultType": "complete", "_meta": STAMP}),
            notification("notifications/tools/list_changed", {"_meta": {SUBSCRIPTION_KEY: "sub"}}),
        ],
        any_order=True,
    ),
    "cancelled-sdk-path-call-is-never-answered": Case(
        [
            *handshake(),
            Send(slow_sdk_call("s", 60)),
            File("started"),
            Send(notification("notifications/cancelled", {"requestId": "s", "reason": "contract"})),
            File("cancelled"),  # the child's handler was cancelled: the proxy's call is over
            Send(request("p", "ping")),
            Answer("p"),
        ],
        [opened(), answer("p", {})],
    ),
    "duplicate-id-in-flight-both-answered": Case(
        [*handshake(), Send(slow_sdk_call(5, 2)), File("started"), Send(request(5, "ping")), Answer(5, times=2)],
        [
            opened(),
            answer(5, {}),  # the ping, while the call with the same id is still in the child
            answer(5, text_result("touched")),
        ],
        any_order=True,
    ),
}


def _rung(rid: str, meta: Any) -> list[Step]:
    return [Send(request(rid, "ping", None if meta is None else {"_meta": meta})), Answer(rid)]


RUNGS: list[tuple[str, Any, dict[str, Any]]] = [
    ("no-meta", None, error("r0", -32602, ENVELOPE_MESSAGE)),
    ("meta-not-an-object", "x", error("r1", -32602, ENVELOPE_MESSAGE)),
    ("missing-capabilities", {VERSION_KEY: MODERN}, error("r2", -32602, MISSING + CAPS_KEY)),
    ("missing-both", {INFO_KEY: {}}, error("r3", -32602, f"{MISSING}{VERSION_KEY}, {CAPS_KEY}")),
    (
        "version-not-a-string",
        {VERSION_KEY: 2026, CAPS_KEY: {}},
        error("r4", -32602, "the protocol-version envelope value must be a string"),
    ),
    (
        "version-not-served",
        {VERSION_KEY: "2025-11-25", CAPS_KEY: {}},
        error("r5", -32022, "Unsupported protocol version", {"supported": [MODERN], "requested": "2025-11-25"}),
    ),
    ("accepted-then-not-found", {VERSION_KEY: MODERN, CAPS_KEY: {}}, not_found("r6", "ping")),
]
for _n, (_name, _meta, _expected) in enumerate(RUNGS):
    CASES[f"envelope-rung-{_name}"] = Case(
        [*MODERN_PING, *_rung(f"r{_n}", _meta)], [not_found("first", "ping"), _expected]
    )


# Gatekeeper's own tool results (a denied tool, the status tool): built by the proxy, not a child's.
# A 2025 host gets no resultType; a 2026 host gets it and the stamp (the SDK server's sieve, which
# answers -32603 for a result it rejects).
DENIED = (
    "Tool 'notes__nope' is not available through Gatekeeper: the policy does not allow it. Use one of the "
    "listed tools, or ask the person running Gatekeeper to add it to policy.yaml."
)
OWN_CALLS = [
    ("d", {"name": "notes__nope", "arguments": {}}, DENIED),
    (
        "s",
        {"name": "gatekeeper_proposal_status", "arguments": {}},
        "Pass proposal_id: the id a proposing call returned.",
    ),
    (
        "u",
        {"name": "gatekeeper_proposal_status", "arguments": {"proposal_id": "nope"}},
        "No proposal 'nope'. Use the proposal_id from the proposing call's result.",
    ),
]


def own_error(text: str, *modern: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": True}
    return {**result, "resultType": "complete", "_meta": STAMP} if modern else result


CASES["own-tool-errors-2025"] = Case(
    [*handshake(), *(step for rid, p, _ in OWN_CALLS for step in (Send(request(rid, "tools/call", p)), Answer(rid)))],
    [opened(), *(answer(rid, own_error(text)) for rid, _, text in OWN_CALLS)],
)
CASES["own-tool-errors-2026"] = Case(
    [*(step for rid, p, _ in OWN_CALLS for step in (Send(modern(rid, "tools/call", p)), Answer(rid)))],
    [answer(rid, own_error(text, True)) for rid, _, text in OWN_CALLS],
)


@pytest.mark.parametrize("name", list(CASES))
def test_a_raw_host_gets_todays_answers(name: str, tmp_path: Path, home: Home) -> None:
    case = CASES[name]
    with raw_proxy(tmp_path, home.path) as proxy:
        transcript = play(proxy, tmp_path, case.steps)
    if case.any_order:
        assert sorted(transcript, key=json.dumps) == sorted(case.transcript, key=json.dumps)
    else:
        assert transcript == case.transcript

"""The MCP wire facts the proxy needs, as plain values, cheap to import on the start-up path.

Importing `mcp_types` costs ~1 s and ~30 MiB before the proxy can spawn a child (issue 12), so
the proxy reads codes, envelope keys and versions from here, and its domain builds its results
as plain dicts with the builders below. `tests/test_mcpwire.py` compares every value, and every
builder's output, with the SDK's own, so a new SDK release that changes one fails there, not on a
host.
"""

from __future__ import annotations

from typing import Any, Final, Literal, Required, TypedDict

JSONRPC_VERSION: Final = "2.0"

# JSON-RPC error codes (mcp_types/jsonrpc.py).
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
CONNECTION_CLOSED: Final = -32000
REQUEST_TIMEOUT: Final = -32001
HEADER_MISMATCH: Final = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
URL_ELICITATION_REQUIRED: Final = -32042

# The 2026 per-request envelope, carried in params._meta.
PROTOCOL_VERSION_META_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_META_KEY: Final = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_META_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL_META_KEY: Final = "io.modelcontextprotocol/logLevel"
SERVER_INFO_META_KEY: Final = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_META_KEY: Final = "io.modelcontextprotocol/subscriptionId"

# Protocol revisions: the handshake era (initialize) and the modern era (per-request envelope).
HANDSHAKE_PROTOCOL_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_PROTOCOL_VERSIONS: Final = ("2026-07-28",)
KNOWN_PROTOCOL_VERSIONS: Final = HANDSHAKE_PROTOCOL_VERSIONS + MODERN_PROTOCOL_VERSIONS
LATEST_HANDSHAKE_VERSION: Final = "2025-11-25"
LATEST_MODERN_VERSION: Final = "2026-07-28"

# Log levels in order of severity (RFC 5424 names, as MCP uses them).
LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

_CACHE_HINTS = frozenset({"cacheScope", "resultType", "ttlMs"})
_INPUT_REQUIRED = frozenset({"inputRequests", "requestState", "resultType"})

# Result keys the 2026 revision added that a handshake-era host must not receive, by method.
# Identical for every handshake version (tests/test_mcpwire.py checks each one against the SDK).
LATER_REVISION_FIELDS: Final[dict[str, frozenset[str]]] = {
    "tools/call": _INPUT_REQUIRED,
    "prompts/get": _INPUT_REQUIRED,
    "resources/read": _INPUT_REQUIRED | {"cacheScope", "ttlMs"},
    "completion/complete": frozenset({"resultType"}),
    "tools/list": _CACHE_HINTS,
    "resources/list": _CACHE_HINTS,
    "resources/templates/list": _CACHE_HINTS,
    "prompts/list": _CACHE_HINTS,
}


def later_revision_fields(method: str, version: str) -> frozenset[str]:
    """Keys to drop from `method`'s result for a host at `version`: none at the modern revision."""
    if version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return frozenset()
    return LATER_REVISION_FIELDS.get(method, frozenset())


# -- wire shapes: what the SDK's models dump to (model_dump(mode="json", by_alias=True, exclude_none=True)) --


class TextContent(TypedDict):
    type: Literal["text"]
    text: str


class CallToolResult(TypedDict, total=False):
    """A ``tools/call`` result. ``resultType`` is a 2026-07-28 field: the SDK server drops it for
    a handshake-era host, and its 2026 sieve needs it (a malformed result is a -32603 there)."""

    content: Required[list[TextContent]]
    structuredContent: dict[str, Any]
    isError: bool
    resultType: str


class ElicitURLParams(TypedDict):
    mode: Literal["url"]
    message: str
    url: str


class ElicitRequest(TypedDict):
    method: Literal["elicitation/create"]
    params: ElicitURLParams


class InputRequiredResult(TypedDict):
    """The 2026-07-28 ``input_required`` answer to a ``tools/call`` (SEP-2322)."""

    resultType: Literal["input_required"]
    inputRequests: dict[str, ElicitRequest]
    requestState: str


class ToolAnnotations(TypedDict, total=False):
    title: str
    readOnlyHint: bool
    destructiveHint: bool
    idempotentHint: bool
    openWorldHint: bool


class Tool(TypedDict, total=False):
    """A tool definition as listed: what the SDK's ``Tool`` dumps to (unknown keys and nulls gone)."""

    name: Required[str]
    title: str
    description: str
    inputSchema: Required[dict[str, Any]]
    execution: dict[str, Any]
    outputSchema: dict[str, Any]
    icons: list[dict[str, Any]]
    annotations: ToolAnnotations
    _meta: dict[str, Any]


ToolAnswer = CallToolResult | InputRequiredResult
"""What Gatekeeper's own handling of a ``tools/call`` answers."""


def text_result(text: str, structured: dict[str, Any] | None = None, *, is_error: bool = False) -> CallToolResult:
    """A ``tools/call`` result with one text block (and structured content, when given)."""
    content: list[TextContent] = [{"type": "text", "text": text}]
    if structured is None:
        return {"content": content, "isError": is_error, "resultType": "complete"}
    return {"content": content, "structuredContent": structured, "isError": is_error, "resultType": "complete"}


def tool_error(text: str) -> CallToolResult:
    """A failed call, said in words the model reads (``isError``): not a protocol error."""
    return text_result(text, is_error=True)


def input_required(key: str, message: str, url: str, state: str) -> InputRequiredResult:
    """Ask the host to open ``url`` (a URL-mode elicitation) and retry with ``state``."""
    request: ElicitRequest = {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}
    return {"resultType": "input_required", "inputRequests": {key: request}, "requestState": state}

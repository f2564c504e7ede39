"""The MCP wire facts the proxy needs, as plain constants: no SDK import on the start-up path.

Importing `mcp_types` costs ~1 s and ~30 MiB before the proxy can spawn a child (issue 12), so
the proxy reads codes, envelope keys and versions from here. `tests/test_mcpwire.py` compares
every value with the SDK's own, so a new SDK release that changes one fails there, not on a host.
"""

from __future__ import annotations

from typing import Final

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

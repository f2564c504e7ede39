"""The proxy's own copy of the MCP wire facts, and the results it builds as plain dicts, equal the
SDK's: a new SDK that moves one fails here, not on a host."""

from __future__ import annotations

import json
from typing import Any

import mcp_types
import mcp_types.version
import pytest
from mcp.client.session import _later_revision_fields
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types.methods import serialize_server_result

from gatekeeper.proxy.catalog import STATUS_TOOL
from gatekeeper.proxy.protocol import mcp as mcpwire

CONSTANTS = [name for name in vars(mcpwire) if name.isupper() and hasattr(mcp_types, name)]
VERSIONS = [name for name in vars(mcpwire) if name.isupper() and name in mcp_types.version.__all__]
METHODS = [*mcpwire.LATER_REVISION_FIELDS, "ping", "logging/setLevel", "initialize", "subscriptions/listen"]


def test_every_constant_the_sdk_also_names_has_the_sdks_value() -> None:
    assert len(CONSTANTS) == 17  # the version, 11 codes and 5 envelope keys are all in mcp_types
    for name in CONSTANTS:
        assert getattr(mcpwire, name) == getattr(mcp_types, name), name


def test_the_protocol_versions_are_the_sdks() -> None:
    assert len(VERSIONS) == 5
    for name in VERSIONS:
        assert getattr(mcpwire, name) == getattr(mcp_types.version, name), name


def test_the_subscription_id_key_is_the_sdks() -> None:
    assert mcpwire.SUBSCRIPTION_ID_META_KEY == SUBSCRIPTION_ID_META_KEY


@pytest.mark.parametrize("version", mcpwire.KNOWN_PROTOCOL_VERSIONS)
@pytest.mark.parametrize("method", METHODS)
def test_later_revision_fields_match_the_sdk_client(method: str, version: str) -> None:
    assert mcpwire.later_revision_fields(method, version) == _later_revision_fields(method, version)


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _text(text: str) -> list[mcp_types.TextContent]:
    return [mcp_types.TextContent(type="text", text=text)]


SUMMARY = {"proposal_id": "p1", "status": "pending", "size": 3, "reviewer": None, "repeat": False, "n": 1.5}


@pytest.mark.parametrize("is_error", [False, True])
@pytest.mark.parametrize("structured", [None, SUMMARY, {}])
def test_a_text_result_is_what_the_sdks_call_tool_result_dumps_to(
    structured: dict[str, Any] | None, is_error: bool
) -> None:
    ours = mcpwire.text_result("Proposed, not written: a — ✓", structured, is_error=is_error)
    sdk = mcp_types.CallToolResult(content=_text("Proposed, not written: a — ✓"), structured_content=structured,
                                   is_error=is_error)  # fmt: skip
    assert json.dumps(ours) == json.dumps(_dump(sdk))  # same keys, same order, same values
    assert mcpwire.tool_error("no") == _dump(mcp_types.CallToolResult(content=_text("no"), is_error=True))


def test_the_hand_off_is_what_the_sdks_input_required_result_dumps_to() -> None:
    url = "http://127.0.0.1:8765/proposals/01JX"
    ours = mcpwire.input_required("gatekeeper_review", "Open the page", url, "signed.state")
    sdk = mcp_types.InputRequiredResult(
        input_requests={
            "gatekeeper_review": mcp_types.ElicitRequest(
                params=mcp_types.ElicitRequestURLParams(message="Open the page", url=url)
            )
        },
        request_state="signed.state",
    )
    assert json.dumps(ours) == json.dumps(_dump(sdk))


def test_the_status_tool_is_a_valid_tool_and_dumps_to_itself() -> None:
    assert json.dumps(STATUS_TOOL) == json.dumps(_dump(mcp_types.Tool.model_validate(STATUS_TOOL)))


@pytest.mark.parametrize("version", mcpwire.KNOWN_PROTOCOL_VERSIONS)
def test_our_results_pass_the_sdk_servers_sieve_in_every_revision(version: str) -> None:
    """What the SDK server does with a handler's dict: a result its sieve rejects is a -32603."""
    results = [
        mcpwire.text_result("x", SUMMARY),
        mcpwire.tool_error("x"),
        *([mcpwire.input_required("k", "m", "http://h/p", "s")] if version in mcpwire.MODERN_PROTOCOL_VERSIONS else []),
    ]
    for result in results:
        sieved = serialize_server_result("tools/call", version, result)
        assert sieved == {
            k: v for k, v in result.items() if k not in mcpwire.later_revision_fields("tools/call", version)
        }
    listing = {"ttlMs": 0, "cacheScope": "private", "tools": [STATUS_TOOL], "resultType": "complete"}  # listing.py's
    assert serialize_server_result("tools/list", version, listing) == {
        k: v for k, v in listing.items() if k not in mcpwire.later_revision_fields("tools/list", version)
    }

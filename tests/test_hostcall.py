"""What the domain reads of a host's request (``HostCall``) decides as the SDK's models did.

The hand-off and the requester recorded with a proposal used to read the SDK server's session
objects; they now read plain dicts dumped from them (``server.host_call``). The old expressions
on the models are the oracle, over the capability shapes hosts send.
"""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest

from gatekeeper.proxy.host.call import HostCall
from gatekeeper.proxy.protocol.mcp import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

CAPABILITIES: list[dict[str, Any] | None] = [
    None,
    {},
    {"elicitation": {}},
    {"elicitation": {"form": {}}},
    {"elicitation": {"url": {}}},
    {"elicitation": {"form": {}, "url": {}}},
    {"elicitation": {"url": None}},
    {"roots": {"listChanged": True}, "sampling": {}},
]


def _dump(model: Any) -> dict[str, Any] | None:
    return None if model is None else model.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS])
@pytest.mark.parametrize("declared", CAPABILITIES)
def test_the_hand_off_is_offered_exactly_when_the_sdks_capabilities_said_so(
    declared: dict[str, Any] | None, version: str
) -> None:
    caps = None if declared is None else mcp_types.ClientCapabilities.model_validate(declared)
    before = version in MODERN_PROTOCOL_VERSIONS and bool(
        caps and caps.elicitation and caps.elicitation.url is not None
    )
    call = HostCall(protocol_version=version, client_capabilities=_dump(caps))
    assert (call.modern and call.url_elicitation()) == before


def test_the_declared_client_is_read_from_its_dump() -> None:
    info = mcp_types.Implementation(name="claude-code", version="2.1.0", title="Claude Code")
    call = HostCall(protocol_version="2025-11-25", client_info=_dump(info))
    assert (call.declared("name"), call.declared("version")) == ("claude-code", "2.1.0")
    assert HostCall(protocol_version=None).declared("name") is None

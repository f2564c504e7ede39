"""The proxy's own copy of the MCP wire facts equals the SDK's: a new SDK that moves one fails here."""

from __future__ import annotations

import mcp_types
import mcp_types.version
import pytest
from mcp.client.session import _later_revision_fields
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from gatekeeper.proxy import mcpwire

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

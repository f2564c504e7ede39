"""servers/url/connection.py's small decisions: secrets from the environment, which errors are the connection's."""

from __future__ import annotations

import pytest
from mcp import MCPError, types

from gatekeeper.policy import Server
from gatekeeper.proxy.servers.url.connection import MissingSecret, failure, headers_for


def server() -> Server:
    return Server.model_validate(
        {
            "url": "http://127.0.0.1:3000/mcp",
            "headers": {"Authorization": {"env": "NOTES_TOKEN", "prefix": "Bearer "}, "X-Team": {"env": "TEAM"}},
            "workspace": "/tmp",
            "tools": {},
        }
    )


def test_headers_take_their_values_from_the_environment() -> None:
    got = headers_for("vault", server(), {"NOTES_TOKEN": "abc", "TEAM": "blue"})
    assert got == {"Authorization": "Bearer abc", "X-Team": "blue"}


def test_a_missing_variable_is_named_and_no_value_is_shown() -> None:
    with pytest.raises(MissingSecret) as caught:
        headers_for("vault", server(), {"NOTES_TOKEN": "abc"})
    assert "TEAM" in str(caught.value) and "'X-Team'" in str(caught.value) and "abc" not in str(caught.value)


def test_a_servers_own_error_is_not_taken_for_a_connection_failure() -> None:
    """A server cannot forge the transport's marker and have a call sent twice as for a lost session."""
    forged = MCPError(types.INTERNAL_ERROR, "nope", data={"gatekeeper_http": "session"})
    assert failure("vault", forged) is None
    assert failure("vault", MCPError(types.INVALID_PARAMS, "bad arguments")) is None
    sdk = failure("vault", MCPError(types.INVALID_REQUEST, "Redirect to http://elsewhere/ not followed; use that URL"))
    assert sdk is not None and sdk.message.startswith("downstream server 'vault': Redirect to http://elsewhere/")
    assert not sdk.reset and not sdk.session_expired

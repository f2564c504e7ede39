"""Servers reached over Streamable HTTP in the policy: ``url``, headers from the environment, where they may be."""

from __future__ import annotations

import pytest

from gatekeeper.policy import load_policy
from gatekeeper.policy.launch import launches
from tests.test_policy import error_of, write

HEAD = "version: 1\nservers:\n  vault:\n"
TAIL = "    workspace: .\n    tools: {read_note: allow}\n"


def policy(body: str) -> str:
    return HEAD + body + TAIL


def test_a_url_server_loads_with_headers_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path,
        policy(
            "    url: http://127.0.0.1:3000/mcp\n"
            "    headers: {Authorization: {env: NOTES_TOKEN, prefix: 'Bearer '}}\n"
            "    timeout: 2m\n"
        ),
    )
    server = load_policy("policy.yaml").servers["vault"]
    assert server.is_remote and server.command is None
    assert server.url == "http://127.0.0.1:3000/mcp" and server.timeout == 120
    header = server.headers["Authorization"]
    assert header.value({"NOTES_TOKEN": "s3cret"}) == "Bearer s3cret"
    assert header.value({}) is None
    # The policy (and so its digest and `policy check`) holds the variable's name, never a value.
    assert "s3cret" not in load_policy("policy.yaml").model_dump_json()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("    url: http://10.0.0.1:3000/mcp\n", "'10.0.0.1' is not a loopback address: servers off this machine need"),
        ("    url: http://notes.example.com/mcp\n    allow_remote: true\n", "a remote server must use https"),
        ("    url: ftp://127.0.0.1/mcp\n", "expected an http:// or https:// URL"),
        ("    url: http://me:pw@127.0.0.1:3000/mcp\n", "must not carry credentials"),
        ("    url: http://127.0.0.1:3000/mcp\n    command: notes\n", "either 'command' or 'url', not both"),
        ("    url: http://127.0.0.1:3000/mcp\n    args: [x]\n", "'args' does not apply to 'url' servers"),
        ("    command: notes\n    timeout: 5\n", "'timeout' does not apply to 'command' servers"),
        ("    url: http://127.0.0.1/mcp\n    headers: {Authorization: 'Bearer abc'}\n", "not the value itself"),
        ("    url: http://127.0.0.1/mcp\n    headers: {X-Token: {env: 'not a name'}}\n", "environment variable name"),
        ("    url: http://127.0.0.1/mcp\n    headers: {Mcp-Session-Id: {env: X}}\n", "set by Gatekeeper itself"),
        ("    url: http://127.0.0.1/mcp\n    allow_addresses: [nope]\n", "expected an IP address or network"),
        ("    url: http://127.0.0.1/mcp\n    timeout: soon\n", "expected seconds or a duration"),
        ("    args: [x]\n", "missing 'command' (a program to start) or 'url'"),
    ],
)
def test_a_bad_url_server_gets_a_precise_message(tmp_path, monkeypatch, body, expected):
    assert expected in error_of(tmp_path, monkeypatch, policy(body))


def test_remote_https_is_accepted_when_opted_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, policy("    url: https://notes.example.com/mcp\n    allow_remote: true\n"))
    assert load_policy("policy.yaml").servers["vault"].allow_remote


def test_url_servers_are_not_started_early_but_command_servers_still_are(tmp_path):
    write(
        tmp_path,
        "version: 1\nservers:\n"
        "  vault:\n    url: http://127.0.0.1:3000/mcp\n    workspace: .\n"
        "  notes:\n    command: /bin/cat\n    workspace: .\n",
    )
    found = launches(tmp_path / "policy.yaml", None)
    assert found is not None and [launch.name for launch in found] == ["notes"]

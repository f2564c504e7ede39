"""server-everything (npm, pinned) in its ``streamableHttp`` mode behind Gatekeeper by ``url``: the
real proxy as a stdio subprocess driven by the official MCP client, in both downstream eras. The
host sees only the tools the policy allows or proposes; echo, progress, resources and prompts pass
through; a denied tool is refused and never reaches the server (which logs every POST it gets);
``gatekeeper policy check`` shows the URL and where the header comes from, never its value.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.types import TextContent

from gatekeeper.home import Home
from tests.http_servers import proxied
from tests.http_support import HttpPeer, everything
from tests.proxy_support import events

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parent.parent
TOKEN = "everything-token-51f0"
LISTED = {"echo", "get-sum", "trigger-long-running-operation", "gzip-file-as-resource", "gatekeeper_proposal_status"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpPeer]:
    with everything(tmp_path_factory.mktemp("everything")) as peer:
        try:
            yield peer
        finally:
            print(peer.output())


def write_policy(tmp: Path, url: str) -> Path:
    workspace = tmp / "files"
    workspace.mkdir(exist_ok=True)
    path = tmp / "policy.yaml"
    path.write_text(
        textwrap.dedent(
            f"""
            version: 1
            servers:
              everything:
                url: {url}
                headers: {{Authorization: {{env: EVERYTHING_TOKEN, prefix: "Bearer "}}}}
                timeout: 20s
                workspace: {workspace}
                tools:
                  echo: allow
                  get-sum: allow
                  trigger-long-running-operation: allow
                  get-env: deny
                  gzip-file-as-resource:
                    propose: {{path: {{arg: name}}, content: {{arg: data}}}}
            """
        )
    )
    return path


def posts(peer: HttpPeer) -> int:
    """How many POSTs the server received so far (it logs one line each)."""
    return peer.stdout.read_text(errors="replace").count("Received MCP POST request")


@pytest.mark.parametrize("downstream", ["auto", "legacy"])
async def test_tools_progress_resources_and_prompts_pass_through(
    server: HttpPeer, tmp_path: Path, home: Home, downstream: str
) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    policy = write_policy(tmp_path, server.url)
    async with proxied(policy, home.path, {"EVERYTHING_TOKEN": TOKEN}, downstream) as p:
        assert {t.name for t in (await p.list_tools()).tools} == LISTED
        echoed = await p.call_tool("echo", {"message": "über 🙂"})
        assert isinstance(echoed.content[0], TextContent) and echoed.content[0].text == "Echo: über 🙂"
        # the SDK client hands progress to this callback only under the token it sent with this call
        result = await p.call_tool(
            "trigger-long-running-operation", {"duration": 0.3, "steps": 3}, progress_callback=on_progress
        )
        assert not result.is_error, result
        assert seen == [(1, 3), (2, 3), (3, 3)]

        resources = (await p.list_resources()).resources
        uris = {str(r.uri) for r in resources}
        assert "demo://resource/static/document/architecture.md" in uris, uris
        read = await p.read_resource("demo://resource/static/document/architecture.md")
        assert read.contents and str(read.contents[0].uri) == "demo://resource/static/document/architecture.md"
        assert read.contents[0].text  # type: ignore[union-attr]
        assert {"simple-prompt", "args-prompt"} <= {pr.name for pr in (await p.list_prompts()).prompts}
        prompt = await p.get_prompt("args-prompt", {"city": "Lyon"})
        assert "Lyon" in prompt.messages[0].content.text  # type: ignore[union-attr]


async def test_a_denied_tool_is_refused_and_never_reaches_the_server(
    server: HttpPeer, tmp_path: Path, home: Home
) -> None:
    policy = write_policy(tmp_path, server.url)
    async with proxied(policy, home.path, {"EVERYTHING_TOKEN": TOKEN}) as p:
        assert not (await p.call_tool("echo", {"message": "warm"})).is_error  # connected
        before = posts(server)
        denied = await p.call_tool("get-env", {})
        assert denied.is_error and "not available through Gatekeeper" in denied.content[0].text  # type: ignore[union-attr]
        assert posts(server) == before  # no request of any kind reached the server
        assert not (await p.call_tool("get-sum", {"a": 2, "b": 3})).is_error
        assert posts(server) > before  # (and the count does move when a call goes through)
    assert [e[0] for e in events(home.path, "tool_denied")] == ["tool_denied"]


def test_policy_check_shows_the_url_and_no_secret(server: HttpPeer, tmp_path: Path, home: Home) -> None:
    policy = write_policy(tmp_path, server.url)
    env = {**os.environ, "GATEKEEPER_HOME": str(home.path), "PYTHONPATH": str(REPO), "EVERYTHING_TOKEN": TOKEN}
    for extra in ([], ["--json"]):
        run = subprocess.run(
            [sys.executable, "-m", "gatekeeper", "policy", "check", "--policy", str(policy), *extra],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        assert server.url in run.stdout and "EVERYTHING_TOKEN" in run.stdout, run.stdout
        assert TOKEN not in run.stdout + run.stderr and "Traceback" not in run.stderr

"""Each policy in examples/ that fronts a real server commits the bytes that server itself would write.

The same call runs twice on two copies of one workspace: once straight at the real server (the
official client, no Gatekeeper), once through Gatekeeper with the example file itself as the policy
(only its placeholder paths replaced), approved through the store and applied by the real committer
(``python -m gatekeeper commit --once``). The files must end up byte for byte the same, or differ
exactly where the example says they do (the filesystem server rewrites CRLF as LF on an edit). The
url example runs against tests/peers/vault_http_server.mjs, the server it names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from gatekeeper.home import Home
from tests.helpers import PROOF, add_reviewer
from tests.http_servers import proxied as http_proxied
from tests.http_support import vault_server
from tests.obsidian_support import make_vault, obsidian_launch, obsidian_params
from tests.peers.external import filesystem_server
from tests.proxy_support import files_under, proxied, rows

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def notes(root: Path) -> dict[str, bytes]:
    """The files under ``root`` without a server's own bookkeeping (obsidian-mcp's .obsidian-mcp/)."""
    return {k: v for k, v in files_under(root).items() if not k.startswith(".obsidian-mcp/")}


def approve_and_commit(home: Home, policy: Path) -> None:
    """Approve every pending proposal as reviewer alice, then run the real committer once."""
    with home.store() as store:
        add_reviewer(store)
        for pid, sha, path, mode, base_sha in rows(
            home.db_path, "SELECT id, sha256, path, mode, base_sha256 FROM proposal ORDER BY created_at, id"
        ):
            store.decide(
                pid, verdict="approved", reviewer="alice", sha256=sha, path=path,
                mode=mode, base_sha256=base_sha, proof=PROOF,
            )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "GATEKEEPER_POLICY"}
    env |= {"GATEKEEPER_HOME": str(home.path), "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "gatekeeper", "commit", "--once", "--json", "--policy", str(policy)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stdout + run.stderr
    outcomes = rows(home.db_path, "SELECT outcome FROM commit_record")
    assert outcomes and {o for (o,) in outcomes} <= {"created", "applied"}, (outcomes, run.stdout)


async def call_directly(params: StdioServerParameters, calls: list[tuple[str, dict[str, Any]]], log: Path) -> None:
    with open(log, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), cache=None) as c:
            for tool, args in calls:
                result = await c.call_tool(tool, args)
                assert not result.is_error, result.content


async def call_through(policy: Path, home: Home, calls: list[tuple[str, dict[str, Any]]]) -> None:
    async with proxied(policy, home.path) as p:
        for tool, args in calls:
            result = await p.call_tool(tool, args)
            assert not result.is_error, result.content
            assert result.content[0].text.startswith("Proposed, not written: "), result.content[0].text


async def test_obsidian_example_appends_what_obsidian_mcp_appends(tmp_path: Path, home: Home) -> None:
    base = b"# Log\nfirst line"  # no newline at the end: where a separator would show
    direct, through = make_vault(tmp_path / "direct"), make_vault(tmp_path / "through")
    for vault in (direct, through):
        (vault / "daily").mkdir()
        (vault / "daily/log.md").write_bytes(base)
    calls = [
        ("obsidian_edit_note", {"vault": "notes", "path": "daily/log.md", "operation": "append", "content": "x — y\n"})
    ]
    await call_directly(obsidian_params(direct), calls, tmp_path / "obsidian-stderr.log")

    command, env = obsidian_launch(through)
    example = (EXAMPLES / "obsidian.yaml").read_text()
    launch = 'command: node\n    args: ["./node_modules/obsidian-mcp/dist/main.js", "serve", '
    launch += '"--vault", "notes=/home/you/vault"]\n'
    assert example.count(launch) == 1 and "workspace: /home/you/vault\n" in example
    text = example.replace(
        launch, f"command: {json.dumps(command[0])}\n    args: {json.dumps(command[1:])}\n    env: {json.dumps(env)}\n"
    ).replace("/home/you/vault", str(through))
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    await call_through(policy, home, calls)
    approve_and_commit(home, policy)

    assert notes(direct)["daily/log.md"] == b"# Log\nfirst linex \xe2\x80\x94 y\n"  # obsidian-mcp adds nothing
    assert notes(through) == notes(direct)


async def test_filesystem_example_writes_and_edits_what_the_server_writes(tmp_path: Path, home: Home) -> None:
    seed = tmp_path / "seed"
    (seed / "notes").mkdir(parents=True)
    (seed / "notes/plan.md").write_bytes(b"plan v1\n")
    (seed / "notes/log.md").write_bytes(b"alpha\nbeta\ngamma\n")
    (seed / "notes/dos.md").write_bytes(b"alpha\r\nbeta\r\ngamma\r\n")
    direct, through = tmp_path / "direct", tmp_path / "through"
    shutil.copytree(seed, direct)
    shutil.copytree(seed, through)

    def calls(root: Path) -> list[tuple[str, dict[str, Any]]]:
        at = str(root.resolve())
        return [
            ("write_file", {"path": f"{at}/notes/plan.md", "content": "plan v2 — final\n"}),
            ("write_file", {"path": f"{at}/notes/new.md", "content": "fresh\n"}),
            ("edit_file", {"path": f"{at}/notes/log.md", "edits": [{"oldText": "beta\ngamma", "newText": "BETA\nG"}]}),
            ("edit_file", {"path": f"{at}/notes/dos.md", "edits": [{"oldText": "beta", "newText": "BETA"}]}),
        ]

    server = str(filesystem_server())
    params = StdioServerParameters(command=server, args=[str(direct.resolve())])
    await call_directly(params, calls(direct), tmp_path / "fs-stderr.log")

    example = (EXAMPLES / "filesystem.yaml").read_text()
    assert example.count("command: ./node_modules/.bin/mcp-server-filesystem\n") == 1
    text = example.replace("./node_modules/.bin/mcp-server-filesystem", server)
    policy = tmp_path / "policy.yaml"
    policy.write_text(text.replace("/home/you/shared", str(through.resolve())))
    await call_through(policy, home, calls(through))
    approve_and_commit(home, policy)

    mine, theirs = files_under(through), files_under(direct)
    assert theirs["notes/dos.md"] == b"alpha\nBETA\ngamma\n"  # the server rewrote every line ending
    assert mine["notes/dos.md"] == b"alpha\r\nBETA\r\ngamma\r\n"  # Gatekeeper changed only the edited text
    assert "CRLF" in example  # ...and the example says so
    assert {k: v for k, v in mine.items() if k != "notes/dos.md"} == {
        k: v for k, v in theirs.items() if k != "notes/dos.md"
    }
    assert theirs["notes/log.md"] == b"alpha\nBETA\nG\n" and theirs["notes/plan.md"] == "plan v2 — final\n".encode()


async def test_http_vault_example_creates_what_the_vault_server_creates(tmp_path: Path, home: Home) -> None:
    token, body = "example-token-5e1", "# Hello\r\nfirst — line\n\nno newline at the end"
    with vault_server(tmp_path / "direct", tmp_path / "logs-d", token=token, json_responses=True) as direct:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        call["params"] = {"name": "create_note", "arguments": {"title": "hello", "body": body}}
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        answer = httpx.post(direct.url, json=call, headers=headers, timeout=30).json()
        assert not answer["result"].get("isError"), answer
        assert direct.root is not None
        theirs = files_under(direct.root)
    with vault_server(tmp_path / "through", tmp_path / "logs-t", token=token) as through:
        example = (EXAMPLES / "http-vault.yaml").read_text()
        assert "http://127.0.0.1:3000/mcp" in example and "workspace: /home/you/vault" in example
        policy = tmp_path / "policy.yaml"
        assert through.root is not None
        policy.write_text(
            example.replace("http://127.0.0.1:3000/mcp", through.url).replace("/home/you/vault", str(through.root))
        )
        async with http_proxied(policy, home.path, {"VAULT_TOKEN": token}) as p:
            result = await p.call_tool("create_note", {"title": "hello", "body": body})
            assert not result.is_error and result.content[0].text.startswith("Proposed, not written: "), result
        approve_and_commit(home, policy)
        assert through.tool_calls("create_note") == []  # the committer wrote it, not the server
        mine = files_under(through.root)
    assert theirs == {"inbox/hello.md": body.encode()} and mine == theirs

"""What ``gatekeeper proxy`` loads: a structural guard on its import graph, not a timing.

The real proxy runs in front of the real notes server, answers a raw initialize, tools/list and a
read, then ends at stdin EOF; an ``atexit`` hook in that process writes down every module loaded,
for each watched package which module imported it first, and which of Gatekeeper's own modules
import it at all. The proxy must start fast (issue 12), so the store writes with sqlite3 (no
SQLAlchemy), the ``proxy`` command loads no other command and no rich, Jinja2 loads only for a
policy with a template, and the HTTP client only for a policy with a url server.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.home import Home
from tests.helpers import line_queue, next_line, wait_until
from tests.proxy_support import REPO

# Never in the proxy's process: the MCP SDK and its wire types (the proxy serves the host and its
# stdio children with its own JSON-RPC code; the SDK loads only for a url server, or for a host line
# only the SDK's parser can judge), the store's ORM and migrations, the PostgreSQL driver (the store
# here is SQLite), the review page, rich, Jinja2 (the policy below has no template), and every
# command module but ``proxy``.
NEVER = (
    "mcp",
    "mcp_types",
    "psycopg",
    "gatekeeper.store.postgres",
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "rich",
    "fastapi",
    "jinja2",
    "gatekeeper.review",
    "webauthn",  # only where an approval's assertion is verified: the review page, the committer
    "argon2",  # only where a password is checked (the review page, a step-up approval)
    "httpcore2",  # only for a url server's pinned connection pool (proxy/servers/url/pinned.py); none here
    "gatekeeper.trust.passwords",
    "gatekeeper.store.schema",
    "gatekeeper.store.engine",
    "gatekeeper.store.migrate",
    *(f"gatekeeper.cli.{m}" for m in ("admin", "audit", "commit_cmd", "host_cmd", "policy_cmd", "review_cmd")),
    *(f"gatekeeper.cli.{m}" for m in ("revert_cmd", "up_cmd", "output")),
)
# HTTP server and client stacks: Gatekeeper itself never imports them. The mcp SDK's package
# ``__init__`` pulls them in whatever submodule is imported (it imports ``Client``, whose in-memory
# transport imports ``mcp.server`` and with it the HTTP transports), so where the SDK loads (a url
# server) they may appear, but only with an ``mcp`` module between Gatekeeper and them.
NOT_BY_GATEKEEPER = ("starlette", "uvicorn", "httpx", "httpx2", "sse_starlette", "cryptography", "opentelemetry")

WATCH = """
import atexit, builtins, importlib.util, json, runpy, sys

out, policy = sys.argv[1], sys.argv[2]
watched = set(json.loads(sys.argv[3]))
importers = {}


def importer_chain():
    '''Modules on the stack, innermost first, without the import machinery and this file.'''
    chain, frame = [], sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not name.startswith(("importlib", "_frozen_importlib", "runpy")) and name != "__main__":
            if not chain or chain[-1] != name:
                chain.append(name)
        frame = frame.f_back
    return chain


class Watch:
    def find_spec(self, name, path=None, target=None):
        if name in watched and name not in importers:
            importers[name] = importer_chain()
        return None


direct = {}  # watched name -> the gatekeeper modules whose own import statements name it
plain_import = builtins.__import__


def recording_import(name, globals=None, locals=None, fromlist=(), level=0):
    '''Every import statement, also of a module already loaded (find_spec sees only the first).'''
    importer = (globals or {}).get("__name__", "")
    if importer.split(".")[0] == "gatekeeper":
        full = importlib.util.resolve_name("." * level + name, globals.get("__package__")) if level else name
        for target in (full, *(f"{full}.{item}" for item in fromlist or ())):
            if target in watched and importer not in direct.setdefault(target, []):
                direct[target].append(importer)
    return plain_import(name, globals, locals, fromlist, level)


builtins.__import__ = recording_import
sys.meta_path.insert(0, Watch())
record = {"importers": importers, "direct": direct}
atexit.register(lambda: json.dump({"modules": sorted(sys.modules), **record}, open(out, "w")))
sys.argv = ["gatekeeper", "proxy", "--policy", policy]
runpy.run_module("gatekeeper", run_name="__main__", alter_sys=True)
"""


def _policy(tmp: Path) -> Path:
    workspace = tmp / "workspace"
    (workspace / "notes").mkdir(parents=True)
    (workspace / "notes" / "a.md").write_text("hello\n")
    policy = tmp / "policy.yaml"
    policy.write_text(
        textwrap.dedent(f"""
        version: 1
        servers:
          notes:
            command: {sys.executable}
            args: ["-m", "gatekeeper.demo.notes_server", "{workspace}"]
            workspace: {workspace}
            env: {{PYTHONPATH: "{REPO}"}}
            tools:
              read_note: allow
              create_note:
                propose:
                  path: {{arg: title}}
                  content: {{arg: body}}
        """)
    )
    return policy


def _run_proxy(tmp: Path, home: Home, watched: list[str]) -> dict[str, Any]:
    """Run the proxy through one handshake, a tools/list and a read; what it had loaded at exit."""
    out = tmp / "imports.json"
    env = {"GATEKEEPER_HOME": str(home.path), "PYTHONPATH": str(REPO), "GATEKEEPER_START_TIMEOUT": "20"}
    with open(tmp / "stderr.log", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", WATCH, str(out), str(_policy(tmp)), json.dumps(watched)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env={**env, "PATH": "/usr/bin:/bin"},
            cwd=tmp,
            text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        lines = line_queue(proc.stdout)
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        messages: list[dict[str, Any]] = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_note", "arguments": {}}},
        ]
        answers: dict[int, dict[str, Any]] = {}
        for message in messages:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            while "id" in message and message["id"] not in answers:  # each answer before the next request
                answer = json.loads(next_line(lines, 30, f"the answer to {message['method']}"))
                if "id" in answer:
                    answers[answer["id"]] = answer
        proc.stdin.close()  # stdin EOF: the proxy ends its child and exits normally (atexit runs)
        assert proc.wait(timeout=30) == 0, (tmp / "stderr.log").read_text()[-2000:]
    tools = [t["name"] for t in answers[2]["result"]["tools"]]
    assert tools == ["read_note", "create_note", "gatekeeper_proposal_status"]
    assert "result" in answers[3] or "error" in answers[3]  # answered, whatever the note server says
    wait_until(out.exists, 10, "the import record")
    loaded: dict[str, Any] = json.loads(out.read_text())
    return loaded


def test_the_proxy_loads_no_orm_no_other_command_no_rich_no_jinja(tmp_path: Path, home: Home) -> None:
    loaded = _run_proxy(tmp_path, home, [*NEVER, *NOT_BY_GATEKEEPER])
    modules = set(loaded["modules"])
    assert "gatekeeper.cli.proxy_cmd" in modules and "gatekeeper.store.store" in modules  # it did run
    present = {name: loaded["importers"].get(name, ["?"])[:6] for name in NEVER if name in modules}
    assert present == {}, f"imported by (innermost first): {present}"


def test_http_stacks_only_come_through_the_mcp_sdk(tmp_path: Path, home: Home) -> None:
    loaded = _run_proxy(tmp_path, home, list(NOT_BY_GATEKEEPER))
    direct = {}
    for name in NOT_BY_GATEKEEPER:
        chain: list[str] = loaded["importers"].get(name, [])
        # innermost gatekeeper module on the stack, and what it was importing when this loaded
        at = next((i for i, m in enumerate(chain) if m.split(".")[0] == "gatekeeper"), None)
        if at is not None and (at == 0 or chain[at - 1].split(".")[0] not in ("mcp", "mcp_types")):
            direct[name] = chain[: at + 1]
    assert direct == {}, f"Gatekeeper imports these itself, not through the SDK: {direct}"


# The propose / wait / hand-off flow and what only it needs: a session that lists tools and reads
# (as here: initialize, tools/list, an allowed call) never proposes, so it never pays for them.
PROPOSAL_FLOW = (
    "gatekeeper.proxy.proposing",
    "gatekeeper.proxy.intake",
    "gatekeeper.proxy.handoff",
    "gatekeeper.content.diff",
)


def test_a_session_that_proposes_nothing_never_loads_the_proposal_flow(tmp_path: Path, home: Home) -> None:
    loaded = _run_proxy(tmp_path, home, list(PROPOSAL_FLOW))
    modules = set(loaded["modules"])
    assert "gatekeeper.proxy.routing" in modules  # it did run
    present = {name: loaded["importers"].get(name, ["?"])[:6] for name in PROPOSAL_FLOW if name in modules}
    assert present == {}, f"imported by (innermost first): {present}"


# A url server's HTTP client: the SDK's Streamable HTTP transport, httpx2 under it, and ours beside
# it (proxy/servers/url/connection.py, proxy/servers/url/carrier.py). Only a policy with a url server loads them.
HTTP_CLIENT = (
    "httpx2",
    "mcp.client.streamable_http",
    "gatekeeper.proxy.servers.url.connection",
    "gatekeeper.proxy.servers.url.carrier",
)


def test_a_url_free_policy_never_imports_the_http_client(tmp_path: Path, home: Home) -> None:
    loaded = _run_proxy(tmp_path, home, list(HTTP_CLIENT))
    modules = set(loaded["modules"])
    assert "gatekeeper.proxy.fast.reply" in modules and "gatekeeper.proxy.servers.downstream" in modules  # it did run
    by_us = {name: loaded["direct"][name] for name in HTTP_CLIENT if loaded["direct"].get(name)}
    assert by_us == {}, f"imported by Gatekeeper's own modules with no url server: {by_us}"
    ours = {name for name in HTTP_CLIENT if name.startswith("gatekeeper.")} & modules
    assert ours == set()
    # The proxy carries every byte itself (issue 12), so nothing brings the SDK's HTTP client in either.
    assert "mcp" not in modules
    assert modules & set(HTTP_CLIENT) == set(), {n: loaded["importers"].get(n) for n in HTTP_CLIENT}


# The proxy's own domain: policy, store, proposals, catalog, status, hand-off. They speak MCP in
# plain wire dicts (proxy/protocol/mcp.py) and read a host's request as a ``HostCall``, so they load
# neither the SDK (``mcp``) nor its wire types (``mcp_types``, ~1 s and ~30 MiB): whatever carries
# the bytes to and from the host and the children, the domain starts without them (issue 12).
DOMAIN = (
    "gatekeeper.policy",
    "gatekeeper.store.store",
    "gatekeeper.store.refusals",
    "gatekeeper.proxy.protocol.mcp",
    "gatekeeper.proxy.host.call",
    "gatekeeper.proxy.audit",
    "gatekeeper.proxy.catalog",
    "gatekeeper.proxy.status",
    "gatekeeper.proxy.handoff",
    "gatekeeper.proxy.intake",
    "gatekeeper.proxy.proposing",
)
SDK_OR_HEAVY = {
    "mcp",
    "mcp_types",
    "sqlalchemy",
    "sqlmodel",
    "psycopg",
    "jinja2",
    "rich",
    "starlette",
    "httpx",
    "httpx2",
}


def test_the_proxy_domain_imports_no_mcp_types_at_all() -> None:
    code = (
        f"import sys, json\nimport {', '.join(DOMAIN)}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(REPO)}, timeout=60
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert {"gatekeeper", "itsdangerous", "anyio"} <= loaded  # it did import the domain (hand-off, status)
    assert loaded & SDK_OR_HEAVY == set()


# The child side: our own client toward a stdio child (proxy/servers/stdio/client.py over childrpc and
# negotiate), the one face the callers use (proxy/servers/face.py), and the callers themselves. The
# SDK's client stays only for url servers (proxy/servers/url/sdkclient.py, loaded only for one).
CHILD_SIDE = """
import json, sys
from pathlib import Path

import anyio

from gatekeeper.policy import load_policy
from gatekeeper.proxy import completion, listing, passthrough  # noqa: F401 (the callers, on dicts)
from gatekeeper.proxy.fast import rewrite as eras
from gatekeeper.proxy.servers.downstream import Downstream
from gatekeeper.proxy.tooldef import tool_dump


async def main():
    policy, logs, mode = load_policy(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

    async def quiet(*args):
        return None

    calls = {"on_message": quiet, "on_log": quiet, "on_event": quiet}
    server = Downstream("notes", policy.servers["notes"], logs, mode=mode, **calls)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.supervise)
        client = await server.ready()
        listed = await server.request("tools/list")
        tools = [tool_dump(tool, client.protocol_version)["name"] for tool in listed["tools"]]
        read = await server.request("tools/call", {"name": "read_note", "arguments": {"path": "notes/a.md"}})
        await server.close()
    sdk = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types"))
    print(json.dumps({"version": client.protocol_version, "tools": tools, "read": read, "sdk": sdk}))


anyio.run(main)
"""


@pytest.mark.parametrize(("mode", "era"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_a_stdio_child_is_served_without_the_sdk(tmp_path: Path, mode: str, era: str) -> None:
    """A real child (the notes server) started, negotiated with (``auto``: the 2026 probe, its listen
    stream and envelope; ``legacy``: initialize), listed and called through ``Downstream``: neither
    ``mcp`` nor ``mcp_types`` is ever imported on the way, in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD_SIDE, str(_policy(tmp_path)), str(tmp_path / "logs"), mode],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["version"] == era  # it did negotiate the era asked for
    assert {"read_note", "create_note"} <= set(seen["tools"])
    assert seen["read"]["content"][0]["text"] == "hello\n" and seen["read"]["resultType"] == "complete"
    assert seen["sdk"] == [], f"the SDK was imported on the child side: {seen['sdk']}"

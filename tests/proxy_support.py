"""Start the real proxy as a stdio subprocess, driven by the official SDK client."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable

NOTES_POLICY = """
version: 1
servers:
  notes:
    command: {py}
    args: ["-m", "gatekeeper.demo.notes_server", "{workspace}"]
    workspace: {workspace}
    env: {{PYTHONPATH: "{repo}"}}
    tools:
      read_note: allow
      list_notes: allow
      search_notes: allow
      count_slowly: allow
      create_note:
        propose:
          path: {{template: "notes/{{{{ args.title | slug }}}}.md"}}
          content: {{arg: body}}
          globs: ["notes/**/*.md"]
          max_bytes: 1000
      write_note:
        propose:
          path: {{arg: path}}
          content: {{arg: body}}
          globs: ["**"]
          max_bytes: 100000
"""

PROBE_SERVER = """
  {name}:
    command: {py}
    args: ["-m", "tests.peers.probe_server"]
    cwd: {repo}
    workspace: {workspace}
    env: {{PYTHONPATH: "{repo}"{extra_env}}}
    tools:
      echo: allow
      pid: allow
      die: allow
      sleep_then_touch: allow
      steps: allow
      grow: allow
      extra: allow
      roots: allow
      shifty: allow
      put:
        propose:
          path: {{arg: path}}
          content: {{arg: content}}
"""


def write_policy(
    tmp: Path, *, probe: bool = False, notes: bool = True, probe_env: str = "", name: str = "probe"
) -> Path:
    workspace = tmp / "workspace"
    (workspace / "notes").mkdir(parents=True, exist_ok=True)
    text = NOTES_POLICY.format(py=PY, workspace=workspace, repo=REPO) if notes else "version: 1\nservers:\n"
    if probe:
        text += PROBE_SERVER.format(py=PY, repo=REPO, workspace=workspace, extra_env=probe_env, name=name)
    policy = tmp / "policy.yaml"
    policy.write_text(textwrap.dedent(text))
    return policy


def proxy_params(policy: Path, home: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=PY,
        args=["-m", "gatekeeper", "proxy", "--policy", str(policy), *extra],
        env={"GATEKEEPER_HOME": str(home), "PYTHONPATH": str(REPO), "GATEKEEPER_START_TIMEOUT": "20"},
        cwd=str(policy.parent),
    )


@asynccontextmanager
async def proxied(
    policy: Path, home: Path, mode: str = "auto", proxy_args: tuple[str, ...] = (), **client_kw: Any
) -> AsyncIterator[Client]:
    errlog = open(home / "proxy-stderr.log", "a")  # noqa: SIM115 - closed below, after the client
    try:
        from mcp.client.stdio import stdio_client

        async with Client(
            stdio_client(proxy_params(policy, home, *proxy_args), errlog=errlog), mode=mode, cache=None, **client_kw
        ) as c:
            yield c
    finally:
        errlog.close()


@asynccontextmanager
async def direct(command: list[str], cwd: Path | None = None, mode: str = "auto") -> AsyncIterator[Client]:
    params = StdioServerParameters(command=command[0], args=command[1:], env={"PYTHONPATH": str(REPO)}, cwd=cwd)
    async with Client(params, mode=mode, cache=None) as c:
        yield c


def rows(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def events(home: Path, kind: str | None = None) -> list[tuple[Any, ...]]:
    if kind:
        return rows(
            home / "gatekeeper.db",
            "SELECT kind, proposal_id, payload FROM audit_event WHERE kind = ? ORDER BY seq",
            kind,
        )
    return rows(home / "gatekeeper.db", "SELECT kind, proposal_id, payload FROM audit_event ORDER BY seq")


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def env_without_home() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "GATEKEEPER_HOME"}


def run_on_files(params: StdioServerParameters, lines: bytes, folder: Path) -> list[dict[str, Any]]:
    """Run the proxy with regular files as stdin and stdout (as some hosts and shell redirections
    do), ``lines`` as its whole input; its answers, in order, once it has ended at end of input."""
    requests, answers = folder / "in.jsonl", folder / "out.jsonl"
    requests.write_bytes(lines)
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        subprocess.run(
            [params.command, *params.args],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            env={**(params.env or {}), "PATH": "/usr/bin:/bin"},
            cwd=params.cwd,
            timeout=30,
            check=True,
        )
    return [json.loads(line) for line in answers.read_bytes().splitlines()]

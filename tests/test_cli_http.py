"""The command line on a policy with ``url`` servers, as a person runs it (``python -m gatekeeper``):
``policy check`` says where each server is and where its header comes from, never the secret, and
warns when the variable is not set; ``host-config`` writes an entry and names the variables the
host's entry must add; ``gatekeeper up`` serves such a policy; a URL the policy may not use is an
error that says what to do, not a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.review_support import free_port, start_up
from tests.test_up import Lines, stop

REPO = Path(__file__).resolve().parent.parent
SECRET = "cli-secret-0b93"
URL = "http://127.0.0.1:3999/mcp"


def write(tmp: Path, extra: str = "") -> Path:
    (tmp / "vault").mkdir(exist_ok=True)
    policy = tmp / "policy.yaml"
    policy.write_text(
        textwrap.dedent(
            f"""
            version: 1
            servers:
              vault:
                url: {URL}
                headers: {{Authorization: {{env: VAULT_TOKEN, prefix: "Bearer "}}, X-Team: {{env: TEAM_ID}}}}
                timeout: 45s
                workspace: ./vault
                tools:
                  read_note: allow
                  create_note: {{propose: {{path: {{arg: path}}, content: {{arg: body}}}}}}
            """
        )
        + extra
    )
    return policy


NOTES = f"""  notes:
    command: {sys.executable}
    args: ["-m", "gatekeeper.demo.notes_server", "./vault"]
    workspace: ./vault
    tools: {{read_note: allow}}
"""


def gatekeeper(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("VAULT_TOKEN", "TEAM_ID", "GATEKEEPER_POLICY")}
    environ |= {"GATEKEEPER_HOME": str(home), "PYTHONPATH": str(REPO), **env}
    run = subprocess.run(
        [sys.executable, "-m", "gatekeeper", *args], env=environ, capture_output=True, text=True, timeout=60
    )
    assert "Traceback" not in run.stderr, run.stderr
    return run


def test_policy_check_shows_where_each_server_is_and_no_secret(tmp_path: Path) -> None:
    policy = write(tmp_path, NOTES)
    args = ("policy", "check", "--policy", str(policy), "--no-start")  # the vault is not running here
    run = gatekeeper(tmp_path / "home", *args, VAULT_TOKEN=SECRET, TEAM_ID="t1")
    assert run.returncode == 0, run.stdout + run.stderr
    said = " ".join(run.stdout.split())  # sentences wrap at 80 columns
    assert f"Server vault: {URL} (Authorization: Bearer $VAULT_TOKEN; X-Team: $TEAM_ID; timeout 45s)" in said
    assert f"Server notes: command {sys.executable}" in said
    assert run.stderr == ""  # both variables are set: nothing to warn about
    rows = [
        json.loads(line)
        for line in gatekeeper(
            tmp_path / "home", "policy", "check", "--json", "--policy", str(policy), VAULT_TOKEN=SECRET
        ).stdout.splitlines()
    ]
    vault = {r["tool"]: r for r in rows if r["server"] == "vault"}
    assert vault["read_note"]["url"] == URL
    assert vault["read_note"]["headers"] == {"Authorization": "Bearer $VAULT_TOKEN", "X-Team": "$TEAM_ID"}
    assert [(r["url"], r["headers"]) for r in rows if r["server"] == "notes"] == [(None, None)]
    assert SECRET not in run.stdout + run.stderr + json.dumps(rows)


def test_policy_check_warns_when_a_header_variable_is_not_set(tmp_path: Path) -> None:
    run = gatekeeper(tmp_path / "home", "policy", "check", "--policy", str(write(tmp_path)), TEAM_ID="t1")
    assert run.returncode == 0, run.stdout + run.stderr
    warnings = [line for line in run.stderr.splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 1, run.stderr
    assert "servers.vault.headers.Authorization: $VAULT_TOKEN is not set here" in warnings[0]
    assert "add it to the env of the host's entry" in warnings[0]


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://10.0.0.5:3000/mcp", "'10.0.0.5' is not a loopback address"),
        ("http://me:pw@127.0.0.1:3000/mcp", "must not carry credentials"),
        ("ftp://127.0.0.1/mcp", "expected an http:// or https:// URL"),
    ],
)
def test_a_url_the_policy_may_not_use_is_a_clear_error(tmp_path: Path, url: str, said: str) -> None:
    policy = write(tmp_path)
    policy.write_text(policy.read_text().replace(URL, url))
    for command in (["policy", "check"], ["host-config"]):
        run = gatekeeper(tmp_path / "home", *command, "--policy", str(policy))
        assert run.returncode != 0 and said in run.stderr, (command, run.stderr)
        assert "pw" not in run.stderr.replace(str(tmp_path), "")


def test_host_config_names_the_variables_the_entry_must_add(tmp_path: Path) -> None:
    policy = write(tmp_path, NOTES)
    run = gatekeeper(tmp_path / "home", "host-config", "--policy", str(policy), VAULT_TOKEN=SECRET)
    assert run.returncode == 0, run.stdout + run.stderr
    entry = json.loads(run.stdout)["mcpServers"]["gatekeeper"]
    assert entry["args"] == ["-m", "gatekeeper", "proxy", "--policy", str(policy)]
    assert set(entry["env"]) == {"GATEKEEPER_HOME", "PATH"}
    notes = run.stderr.splitlines()
    assert len(notes) == 2 and all(n.startswith("Note: server 'vault' sends ") for n in notes), run.stderr
    assert 'add "VAULT_TOKEN": "<its value>" to "env" above' in notes[0]
    assert 'add "TEAM_ID": "<its value>" to "env" above' in notes[1]
    assert SECRET not in run.stdout + run.stderr


@pytest.mark.slow
def test_up_serves_a_policy_with_url_servers(tmp_path: Path) -> None:
    """The committer and the review page need no connection to the server: `up` starts as usual."""
    policy = write(tmp_path, NOTES)
    proc = start_up(tmp_path / "home", free_port(), policy, "a long enough password")
    lines = Lines(proc)
    try:
        lines.wait_for("one-time link")
        lines.wait_for(f"Committing into the workspaces of {policy}")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert not any("Traceback" in line or "Error" in line for line in lines.seen), lines.seen
    finally:
        stop(proc)

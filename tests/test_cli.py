"""Every CLI command: output for people, --json parsed back, bad arguments, missing state."""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gatekeeper.cli import cli
from gatekeeper.home import Home
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from tests.helpers import PROOF, add_reviewer, draft, line_queue, next_line, record_commit


def run(*args: str, code: int = 0, home: Home | Path | None = None) -> str:
    prefix = ["--home", str(home.path if isinstance(home, Home) else home)] if home is not None else []
    result = CliRunner().invoke(cli, [*prefix, *args], catch_exceptions=False)
    assert result.exit_code == code, (result.exit_code, result.output, result.stderr)
    return result.output


def flat(text: str) -> str:
    """Output wrapped to fit 80 columns, as one line: sentences are checked whole."""
    return " ".join(text.split())


def squeezed(text: str) -> str:
    """Output wrapped to fit 80 columns with every space removed: a long path may be folded mid-word."""
    return "".join(text.split())


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def filled(home: Home) -> dict[str, str]:
    """pending, approved, rejected, committed and conflict proposals on two servers."""
    ids: dict[str, str] = {}
    with Store(home.db_path) as s:
        add_reviewer(s)
        for name, server in [
            ("pending", "notes"),
            ("approved", "notes"),
            ("rejected", "files"),
            ("committed", "files"),
            ("conflict", "notes"),
        ]:
            p = s.propose(draft(f"notes/{name}.md", f"{name}\n".encode(), server=server))
            ids[name] = p.id
            if name == "pending":
                continue
            verdict = "rejected" if name == "rejected" else "approved"
            s.decide(
                p.id,
                verdict=verdict,
                reviewer="alice",
                reason="no" if name == "rejected" else None,
                sha256=p.sha256,
                path=f"notes/{name}.md",
                proof=PROOF,
            )
            if name in ("committed", "conflict"):
                outcome = "created" if name == "committed" else "conflict"
                record_commit(s, p.id, outcome, observed_sha256=p.sha256, final_path=f"/nowhere/{name}.md")
    return ids


# -- init and db -----------------------------------------------------------------------------


def test_init_creates_private_home_db_and_key(tmp_path: Path) -> None:
    target = tmp_path / "new" / "home"
    out = run("init", home=target)
    assert "Initialised" in out
    assert oct(target.stat().st_mode & 0o777) == "0o700"
    assert oct((target / "secret.key").stat().st_mode & 0o777) == "0o600"
    assert oct((target / "gatekeeper.db").stat().st_mode & 0o777) == "0o600"
    assert len((target / "secret.key").read_bytes()) == 32
    key = (target / "secret.key").read_bytes()
    db_bytes = b"".join(p.read_bytes() for p in target.glob("gatekeeper.db*"))
    assert key not in db_bytes  # the key is never stored in the database
    events = jsonl(run("audit", "log", "--json", home=target))
    assert [e["kind"] for e in events] == ["init"]
    assert "already initialised" in run("init", home=target)
    assert len(jsonl(run("audit", "log", "--json", home=target))) == 1
    assert (target / "secret.key").read_bytes() == key  # never replaced
    private = target / "keys" / "decision-ed25519"  # the Ed25519 key pair (issue 15), made once too
    assert oct(private.stat().st_mode & 0o777) == "0o600" and oct((target / "keys").stat().st_mode & 0o777) == "0o700"
    assert len(list((target / "keys").glob("*.pub"))) == 1 and "decision key" in out


def test_home_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEKEEPER_HOME", str(tmp_path / "envhome"))
    run("init")
    assert (tmp_path / "envhome" / "gatekeeper.db").is_file()


def test_world_readable_key_is_refused(home: Home) -> None:
    os.chmod(home.key_path, 0o644)
    with pytest.raises(Exception, match="readable by others"):
        home.read_key()


def test_db_status_and_upgrade(home: Home) -> None:
    assert "up to date" in run("db", "status", home=home)
    assert jsonl(run("db", "status", "--json", home=home))[0]["up_to_date"] is True
    assert "nothing to do" in run("db", "upgrade", home=home)


def test_db_upgrade_on_a_blank_database_records_an_event(tmp_path: Path) -> None:
    target = tmp_path / "h"
    target.mkdir(mode=0o700)
    sqlite3.connect(target / "gatekeeper.db").close()
    result = CliRunner().invoke(cli, ["--home", str(target), "audit", "log"])
    assert result.exit_code == 1 and "gatekeeper db upgrade" in result.stderr
    result = CliRunner().invoke(cli, ["--home", str(target), "db", "status"])
    assert result.exit_code == 1 and "pending: 0001, 0002, 0003, 0004, 0005" in result.output
    assert "upgraded blank" in run("db", "upgrade", home=target)
    assert [e["kind"] for e in jsonl(run("audit", "log", "--json", home=target))] == ["db_upgrade"]


@pytest.mark.parametrize(
    "args",
    [
        ["audit", "proposals"],
        ["audit", "log"],
        ["audit", "verify"],
        ["audit", "head"],
        ["audit", "show", "X"],
        ["audit", "export"],
        ["db", "status"],
        ["db", "upgrade"],
    ],
)
def test_missing_home_says_what_to_run(tmp_path: Path, args: list[str]) -> None:
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "nope"), *args])
    assert result.exit_code == 1
    assert "gatekeeper init" in result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_missing_database_says_what_to_run(tmp_path: Path) -> None:
    (tmp_path / "h").mkdir()
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "h"), "audit", "verify"])
    assert result.exit_code == 1 and "no database" in result.stderr and "gatekeeper init" in result.stderr


def test_newer_schema_is_refused_by_the_cli(home: Home) -> None:
    conn = sqlite3.connect(home.db_path)
    conn.execute("UPDATE alembic_version SET version_num = '9999'")
    conn.commit()
    result = CliRunner().invoke(cli, ["audit", "proposals"])
    assert result.exit_code == 1 and "newer than this Gatekeeper" in result.stderr


# -- audit proposals / show ------------------------------------------------------------------


def test_proposals_table_and_json(home: Home, filled: dict[str, str]) -> None:
    rows = jsonl(run("audit", "proposals", "--json"))
    assert {r["id"]: r["status"] for r in rows} == {v: k for k, v in filled.items()}
    assert [r["id"] for r in rows] == list(reversed(filled.values()))  # newest first (made in this order)
    for key in ("id", "status", "server", "tool", "path", "size", "sha256", "created_at"):
        assert all(key in r for r in rows)
    table = run("audit", "proposals")
    assert "5 proposal(s)" in table and filled["pending"] not in table  # a short id: 8 characters or more
    assert re.search(rf"^{filled['pending'][:8]}\w*  pending ", table, re.M)
    assert filled["pending"] in run("audit", "proposals", "--wide")


@pytest.mark.parametrize("status", ["pending", "approved", "rejected", "committed", "conflict"])
def test_proposals_filter_by_status(home: Home, filled: dict[str, str], status: str) -> None:
    rows = jsonl(run("audit", "proposals", "--status", status, "--json"))
    assert [r["id"] for r in rows] == [filled[status]]


def test_proposals_filter_by_server_since_and_limit(home: Home, filled: dict[str, str]) -> None:
    assert {r["server"] for r in jsonl(run("audit", "proposals", "--server", "files", "--json"))} == {"files"}
    assert len(jsonl(run("audit", "proposals", "--server", "files", "--json"))) == 2
    assert len(jsonl(run("audit", "proposals", "--limit", "2", "--json"))) == 2
    assert len(jsonl(run("audit", "proposals", "--since", "1h", "--json"))) == 5
    assert len(jsonl(run("audit", "proposals", "--since", "1w", "--json"))) == 5
    assert jsonl(run("audit", "proposals", "--since", "2999-01-01T00:00:00Z", "--json")) == []
    assert len(jsonl(run("audit", "proposals", "--since", "2000-01-01", "--json"))) == 5


@pytest.mark.parametrize(
    "args, message",
    [
        (["audit", "proposals", "--status", "bogus"], "'bogus' is not one of"),
        (["audit", "proposals", "--limit", "0"], "0 is not in the range x>=1"),
        (["audit", "proposals", "--limit", "x"], "'x' is not a valid integer"),
        (["audit", "proposals", "--since", "yesterday"], "neither a duration"),
        (["audit", "log", "--since", "5x"], "neither a duration"),
        (["audit", "log", "--since", "99999999999w"], "neither a duration"),
        (["audit", "export", "--format", "xml"], "'xml' is not one of"),
        (["audit", "show"], "Missing argument 'PROPOSAL_ID'"),
        (["audit", "nope"], "No such command 'nope'"),
        (["audit", "verify", "--bogus"], "No such option '--bogus'"),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_message(home: Home, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_show_text_json_and_content(home: Home, filled: dict[str, str]) -> None:
    pid = filled["committed"]
    out = run("audit", "show", pid)
    for text in (pid, "committed", "notes/committed.md", "alice", "commit_intent", "/nowhere/committed.md"):
        assert text in out
    detail = jsonl(run("audit", "show", pid, "--json"))[0]
    assert detail["status"] == "committed"
    assert detail["decision"]["verdict"] == "approved"
    assert detail["commit"]["outcome"] == "created"
    assert [e["kind"] for e in detail["events"]] == [
        "proposal_created",
        "decision",
        "commit_intent",
        "commit_outcome",
    ]
    assert detail["arguments"] == {"path": "notes/committed.md", "content": "committed\n"}
    assert "content" not in detail and "content_base64" not in detail
    with_content = jsonl(run("audit", "show", pid, "--json", "--content"))[0]
    assert base64.b64decode(with_content["content_base64"]) == b"committed\n"
    assert CliRunner().invoke(cli, ["audit", "show", pid, "--content"]).stdout_bytes == b"committed\n"


def test_show_unknown_id(home: Home) -> None:
    result = CliRunner().invoke(cli, ["audit", "show", "01NOPE"])
    assert result.exit_code == 1 and "no proposal 01NOPE" in result.stderr


# -- audit log / head / verify / export ------------------------------------------------------


def test_log_filters(home: Home, filled: dict[str, str]) -> None:
    everything = jsonl(run("audit", "log", "--json"))
    assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1))
    decisions = jsonl(run("audit", "log", "--kind", "decision", "--json"))
    assert len(decisions) == 4 and all(e["kind"] == "decision" for e in decisions)
    mine = jsonl(run("audit", "log", "--proposal", filled["conflict"], "--json"))
    assert [e["kind"] for e in mine] == ["proposal_created", "decision", "commit_intent", "commit_outcome"]
    assert mine[-1]["payload"]["outcome"] == "conflict"
    assert jsonl(run("audit", "log", "--since", "2999-01-01T00:00:00Z", "--json")) == []
    assert "proposal_created" in run("audit", "log")


def test_log_of_an_unknown_proposal_is_an_error(home: Home, filled: dict[str, str]) -> None:
    result = CliRunner().invoke(cli, ["audit", "log", "--proposal", "NOSUCH"])
    assert result.exit_code == 1
    assert "no proposal NOSUCH" in result.stderr and "gatekeeper audit proposals" in result.stderr
    assert result.stdout == ""
    as_json = CliRunner().invoke(cli, ["audit", "log", "--proposal", "NOSUCH", "--json"])
    assert as_json.exit_code == 1 and "no proposal NOSUCH" in as_json.stderr


def test_head_and_verify(home: Home, filled: dict[str, str]) -> None:
    head = jsonl(run("audit", "head", "--json"))[0]
    seq, digest = run("audit", "head").split()
    assert (int(seq), digest) == (head["seq"], head["hash"])
    out = run("audit", "verify")
    assert out.startswith(f"OK: {head['seq']} events") and digest in out
    line = f"{seq} {digest}"
    assert jsonl(run("audit", "verify", "--json", "--expect-head", line))[0]["ok"] is True
    assert jsonl(run("audit", "verify", "--json", "--expect-head", digest))[0]["ok"] is True  # a bare hash
    as_json = json.dumps(head)
    assert jsonl(run("audit", "verify", "--json", "--expect-head", as_json))[0]["ok"] is True
    bad = CliRunner().invoke(cli, ["audit", "verify", "--expect-head", "1" * 64])
    assert bad.exit_code == 1 and f"FAILED at seq {head['seq'] + 1}" in bad.output
    assert "is at no seq of the log" in bad.output


def _grow(home: Home) -> None:
    with Store(home.db_path) as s:
        for i in range(3):
            s.propose(draft(f"notes/grown-{i}.md", b"grown\n"))


def test_verify_expect_head_passes_on_a_grown_log(home: Home, filled: dict[str, str]) -> None:
    saved = run("audit", "head").strip()
    _grow(home)
    out = run("audit", "verify", "--expect-head", saved)
    assert out.startswith("OK: ") and run("audit", "head").split()[0] != saved.split()[0]
    report = jsonl(run("audit", "verify", "--json", "--expect-head", saved))[0]
    assert report["ok"] is True and report["expected_head"] == saved


def test_verify_expect_head_fails_on_a_cut_log(home: Home, filled: dict[str, str]) -> None:
    saved = run("audit", "head").strip()
    seq = int(saved.split()[0])
    _grow(home)  # it grew, then lost more than it grew: the tail behind the saved head is gone
    conn = sqlite3.connect(home.db_path)
    conn.execute("DROP TRIGGER audit_event_no_delete")
    conn.execute("DELETE FROM audit_event WHERE seq >= ?", (seq - 1,))
    conn.commit()
    conn.close()
    out = run("audit", "verify", code=1)  # the chain alone cannot tell; a commit_record left without its event can
    assert out.startswith("OK: ") and "has no commit_outcome event" in out, out
    result = CliRunner().invoke(cli, ["audit", "verify", "--expect-head", saved])
    assert result.exit_code == 1
    assert (
        f"the log ends at seq {seq - 2} but the saved head is at seq {seq}: events were removed from the end"
        in result.output
    )
    report = jsonl(CliRunner().invoke(cli, ["audit", "verify", "--json", "--expect-head", saved]).output)[0]
    assert report["ok"] is False and report["bad_seq"] == seq - 1


def test_verify_expect_head_fails_on_a_rewritten_log(home: Home, filled: dict[str, str]) -> None:
    from gatekeeper.store.chain import event_hash

    saved = run("audit", "head").strip()
    seq, old = int(saved.split()[0]), saved.split()[1]
    _grow(home)
    conn = sqlite3.connect(home.db_path)  # an attacker with the file rewrites seq 2 and re-hashes the rest
    conn.execute("DROP TRIGGER audit_event_no_update")
    conn.execute("UPDATE audit_event SET actor = 'mallory' WHERE seq = 2")
    prev = conn.execute("SELECT hash FROM audit_event WHERE seq = 1").fetchone()[0]
    for s, at, kind, actor, pid, body in conn.execute(
        "SELECT seq, at, kind, actor, proposal_id, payload FROM audit_event WHERE seq >= 2 ORDER BY seq"
    ).fetchall():
        digest = event_hash(prev, s, at, kind, actor, pid, body)
        conn.execute("UPDATE audit_event SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, digest, s))
        prev = digest
    conn.commit()
    new = conn.execute("SELECT hash FROM audit_event WHERE seq = ?", (seq,)).fetchone()[0]
    conn.close()
    assert run("audit", "verify").startswith("OK: ")  # the chain alone is consistent again
    result = CliRunner().invoke(cli, ["audit", "verify", "--expect-head", saved])
    assert result.exit_code == 1
    assert f"the event at seq {seq} has hash {new}, the saved head says {old}: the log was rewritten" in result.output


@pytest.mark.parametrize("text", ["", "12", "12 nothex", "a b c"])
def test_verify_expect_head_refuses_what_it_cannot_read(home: Home, text: str) -> None:
    result = CliRunner().invoke(cli, ["audit", "verify", "--expect-head", text])
    assert result.exit_code == 2
    assert "Invalid value for '--expect-head'" in result.stderr and "gatekeeper audit head" in result.stderr


def test_verify_names_the_tampered_row(home: Home, filled: dict[str, str]) -> None:
    conn = sqlite3.connect(home.db_path)
    conn.execute("DROP TRIGGER audit_event_no_update")
    conn.execute("UPDATE audit_event SET actor = 'mallory' WHERE seq = 3")
    conn.commit()
    result = CliRunner().invoke(cli, ["audit", "verify"])
    assert result.exit_code == 1
    assert "FAILED at seq 3" in result.output
    assert jsonl(CliRunner().invoke(cli, ["audit", "verify", "--json"]).output)[0]["bad_seq"] == 3


def test_verify_files_reports_missing_and_changed(home: Home, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with Store(home.db_path) as s:
        add_reviewer(s)
        for name in ("kept", "changed", "missing"):
            p = s.propose(draft(f"{name}.md", f"{name}\n".encode()))
            s.decide(p.id, verdict="approved", reviewer="alice", sha256=p.sha256, path=f"{name}.md", proof=PROOF)
            (ws / f"{name}.md").write_text(f"{name}\n")
            record_commit(s, p.id, "created", observed_sha256=p.sha256, final_path=str(ws / f"{name}.md"))
    assert "0 problem(s)" in run("audit", "verify", "--files")
    (ws / "changed.md").write_text("tampered\n")
    (ws / "missing.md").unlink()
    result = CliRunner().invoke(cli, ["audit", "verify", "--files"])
    assert result.exit_code == 1
    assert f"FILE changed: {ws / 'changed.md'}" in result.output
    assert f"FILE missing: {ws / 'missing.md'}" in result.output
    report = jsonl(CliRunner().invoke(cli, ["audit", "verify", "--files", "--json"]).output)[0]
    assert report["files_checked"] == 3 and not report["ok"]
    assert {p["problem"] for p in report["file_problems"]} == {"changed", "missing"}


def test_export_jsonl_and_csv(home: Home, filled: dict[str, str]) -> None:
    events = jsonl(run("audit", "export"))
    assert events == jsonl(run("audit", "log", "--json"))
    rows = list(csv.DictReader(io.StringIO(run("audit", "export", "--format", "csv"))))
    assert [int(r["seq"]) for r in rows] == [e["seq"] for e in events]
    assert rows[0]["hash"] == events[0]["hash"]
    assert json.loads(rows[1]["payload"]) == events[1]["payload"]
    assert jsonl(run("audit", "export", "--since", "2999-01-01T00:00:00Z")) == []


# -- real processes: what only a process shows ------------------------------------------------


def gk(*args: str, env_home: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GATEKEEPER_HOME": str(env_home)}
    return subprocess.run(
        [sys.executable, "-m", "gatekeeper", *args], capture_output=True, text=True, env=env, timeout=60, **kw
    )  # type: ignore[call-overload]


def test_python_dash_m_and_errors_without_traceback(tmp_path: Path) -> None:
    result = gk("audit", "verify", env_home=tmp_path / "missing")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("Error: no Gatekeeper home") and "Traceback" not in result.stderr
    assert gk("init", env_home=tmp_path / "h").returncode == 0
    assert gk("audit", "verify", env_home=tmp_path / "h").stdout.startswith("OK: 1 events")


@pytest.mark.timeout(90)  # --follow never ends by itself
def test_log_follow_prints_events_appended_by_another_process(home: Home) -> None:
    env = {**os.environ, "GATEKEEPER_HOME": str(home.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gatekeeper", "audit", "log", "--follow", "--json"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        lines = line_queue(proc.stdout)
        with Store(home.db_path) as s:
            s.append_event("test_one", "test", {"n": 1})
        # Printed from the backlog or followed: either way the follower is running once it shows.
        first = json.loads(next_line(lines, 30, "the follower to print test_one"))
        with Store(home.db_path) as s:
            s.append_event("test_two", "test", {"n": 2})  # appended after that: only following finds it
        second = json.loads(next_line(lines, 30, "the follower to print test_two, appended later"))
        assert (first["kind"], second["kind"]) == ("test_one", "test_two")
        assert second["payload"] == {"n": 2}
    finally:
        proc.kill()
        proc.wait()
    with Reader(home.db_path) as r:
        assert r.head()[0] == 2


# -- policy check ----------------------------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = str(Path(sys.executable).absolute().parent)


@pytest.fixture(autouse=True)
def _venv_python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a shell with the venv active: the example policy's bare `python` is found there."""
    monkeypatch.setenv("PATH", f"{VENV_BIN}:/usr/bin:/bin")


def test_policy_check_prints_the_effective_rules(home: Home, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    shutil.copy(REPO / "policy.yaml", policy)
    (tmp_path / "workspace").mkdir()
    out = run("policy", "check", "--policy", str(policy))
    assert "create_note" in out and "propose" in out and "Tools not named above are denied." in out
    listen = f"(`gatekeeper up --policy {policy}` listens on port 8765 for it)"
    assert squeezed(f"Review page for agents: http://localhost:8765 {listen}") in squeezed(out)
    rows = jsonl(run("policy", "check", "--policy", str(policy), "--json"))
    assert {r["tool"]: r["action"] for r in rows} == {
        "read_note": "allow",
        "list_notes": "allow",
        "search_notes": "allow",
        "create_note": "propose",
    }


def test_policy_check_shows_the_mode_of_each_propose_rule(home: Home, tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "version: 1\nservers:\n  files:\n    command: python\n    workspace: ws\n    tools:\n"
        "      write_file: {propose: {mode: replace, create_if_missing: true, path: {arg: path}, "
        "content: {arg: content}}}\n"
        "      edit_file: {propose: {mode: edit, path: {arg: path}}}\n"
        "      note: {propose: {mode: append, path: {arg: path}, content: {arg: content}, "
        "when: {operation: append}}}\n"
    )
    out = run("policy", "check", "--policy", str(policy), "--wide", "--no-start")  # `python` is no MCP server
    cells = {row[2]: row for row in (re.split(r"  +", line) for line in out.splitlines()) if len(row) > 4}
    assert cells["write_file"][4] == "replace"
    assert cells["edit_file"][4] == "edit"
    assert "arg:edits [oldText → newText, dry run: dryRun]" in out
    assert cells["note"][4] == "append (when operation=append)"
    rows = {r["tool"]: r for r in jsonl(run("policy", "check", "--policy", str(policy), "--json", "--no-start"))}
    assert {t: r["mode"] for t, r in rows.items()} == {"write_file": "replace", "edit_file": "edit", "note": "append"}


def test_policy_check_warns_about_a_missing_workspace(home: Home, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    shutil.copy(REPO / "policy.yaml", policy)
    result = CliRunner().invoke(cli, ["policy", "check", "--policy", str(policy)])
    assert result.exit_code == 0 and "Warning:" in result.stderr and "workspace" in result.stderr


def test_policy_check_from_environment_and_errors(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text("version: 1\nservers:\n  notes:\n    comand: python\n    workspace: .\n")
    monkeypatch.setenv("GATEKEEPER_POLICY", str(bad))
    result = CliRunner().invoke(cli, ["policy", "check"])
    assert result.exit_code == 2
    assert "policy.yaml:4: servers.notes: unknown key 'comand' (did you mean 'command'?)" in result.stderr
    assert "Traceback" not in result.stderr


def test_policy_check_without_any_policy(home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["policy", "check"])
    assert result.exit_code == 2 and "policy" in result.stderr.lower() and "--policy" in result.stderr


def test_policy_check_shows_and_accepts_tool_changes(home: Home, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    shutil.copy(REPO / "policy.yaml", policy)
    (tmp_path / "workspace").mkdir()
    with Store(home.db_path) as s:
        s.observe_tools("notes", {"read_note": ("a" * 64, "{}")})
        s.observe_tools("notes", {"read_note": ("b" * 64, '{"x":1}')})
    result = CliRunner().invoke(cli, ["policy", "check", "--policy", str(policy)])
    assert result.exit_code == 0
    assert f"Withheld: notes.read_note definition {'a' * 12} -> {'b' * 12}" in result.stderr
    assert "--accept-changes" in result.stderr
    out = run("policy", "check", "--policy", str(policy), "--accept-changes")
    assert f"Accepted: notes.read_note definition {'a' * 12} -> {'b' * 12}" in out
    result = CliRunner().invoke(cli, ["policy", "check", "--policy", str(policy)])
    assert "Withheld" not in result.stderr
    kinds = [e["kind"] for e in jsonl(run("audit", "log", "--json"))]
    assert kinds[-1] == "tool_change_accepted"


def bad_command_policy(tmp_path: Path, command: str) -> Path:
    policy = tmp_path / "policy.yaml"
    shutil.copy(REPO / "policy.yaml", policy)
    policy.write_text(policy.read_text().replace("command: python ", f"command: {command} "))
    (tmp_path / "workspace").mkdir(exist_ok=True)
    return policy


def test_policy_check_fails_when_a_command_is_not_on_the_path(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = bad_command_policy(tmp_path, "pythn")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    result = CliRunner().invoke(cli, ["policy", "check", "--policy", str(policy)])
    assert result.exit_code == 1, result.output
    assert "create_note" in result.stdout  # the rules are still shown
    line = next(n for n, text in enumerate(policy.read_text().splitlines(), 1) if "command: pythn" in text)
    assert (
        f"Error: {policy}:{line}: servers.notes.command: server 'notes': command 'pythn' not found on PATH "
        "(/usr/bin:/bin); use an absolute path or set PATH in the server's env"
    ) in result.stderr
    assert "Traceback" not in result.stderr


def test_policy_check_fails_when_a_command_cannot_start(home: Home, tmp_path: Path) -> None:
    server = tmp_path / "bin" / "notes-server"
    server.parent.mkdir()
    server.write_text("#!/opt/nowhere/python3\n")
    server.chmod(0o755)
    policy = bad_command_policy(tmp_path, "./bin/notes-server")
    result = CliRunner().invoke(cli, ["policy", "check", "--policy", str(policy)])
    assert result.exit_code == 1
    assert f"command '{server}' needs the #! interpreter /opt/nowhere/python3" in result.stderr
    server.write_text("#!/bin/sh\n")
    server.chmod(0o644)
    result = CliRunner().invoke(cli, ["policy", "check", "--policy", str(policy)])
    assert result.exit_code == 1 and f"command '{server}' is not executable (chmod +x {server})" in result.stderr


def test_policy_check_of_a_missing_command_as_a_process(tmp_path: Path) -> None:
    policy = bad_command_policy(tmp_path, "pythn")
    result = gk("policy", "check", "--policy", str(policy), env_home=tmp_path / "h", cwd="/")
    assert result.returncode == 1
    assert "servers.notes.command: server 'notes': command 'pythn' not found on PATH" in result.stderr
    assert "Traceback" not in result.stderr


def test_policy_check_names_the_port_up_must_use(home: Home, tmp_path: Path) -> None:
    policy = bad_command_policy(tmp_path, "python")
    policy.write_text(policy.read_text().replace("http://localhost:8765", "http://localhost:9123/review"))
    out = run("policy", "check", "--policy", str(policy))
    listen = f"(`gatekeeper up --policy {policy}` listens on port 9123 for it)"
    assert squeezed(f"Review page for agents: http://localhost:9123/review {listen}") in squeezed(out)
    policy.write_text(policy.read_text().replace("http://localhost:9123/review", "https://review.example.org"))
    assert "https://review.example.org (not a local address" in flat(run("policy", "check", "--policy", str(policy)))


def test_every_command_that_reads_a_policy_shares_one_policy_option() -> None:
    """``--policy`` is declared once (``cli/context.py``), so its default order cannot drift."""
    import click

    def commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
        out: list[tuple[str, click.Command]] = []
        ctx = click.Context(group)
        for name in group.list_commands(ctx):  # the API, not group.commands: subcommands load lazily
            command = group.get_command(ctx, name)
            assert command is not None, name
            out.append((prefix + name, command))
            if isinstance(command, click.Group):
                out += commands(command, prefix + name + " ")
        return out

    taking = {
        name: next(p for p in command.params if p.name == "policy_file")
        for name, command in commands(cli)
        if any(p.name == "policy_file" for p in command.params)
    }
    assert sorted(taking) == [
        "audit verify",  # --approvals: origins from the review_url
        "commit",
        "host-config",
        "policy check",
        "proxy",
        "revert",
        "review",  # approve_with
        "review login-link",  # the link's origin
        "reviewer add",  # the enrolment link's origin
        "reviewer enrol",
        "up",
    ]
    assert len({(tuple(p.opts), p.envvar, getattr(p, "help", None)) for p in taking.values()}) == 1
    sources = "".join(p.read_text() for p in (Path(__file__).parent.parent / "gatekeeper" / "cli").glob("*.py"))
    assert len(re.findall(r'click\.option\(\s*"--policy"', sources)) == 1


@pytest.mark.parametrize("name, ok", [("jane.doe", True), ("Jane", False), ("a" + "b" * 32, False)])
def test_reviewer_names_follow_the_one_name_grammar(home: Home, name: str, ok: bool) -> None:
    args = ["--home", str(home.path), "reviewer", "add", name, "--password-stdin"]
    result = CliRunner().invoke(cli, args, input="a long enough password\n")
    if ok:
        assert result.exit_code == 0 and f"Added reviewer {name}." in result.output
    else:
        assert result.exit_code == 2, result.output
        assert f"Error: reviewer name {name!r} is not allowed" in result.stderr
        assert (
            "a reviewer name must start with a lowercase letter and use only a-z, 0-9, '.', '_' and '-'"
            in result.stderr
        )

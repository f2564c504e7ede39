"""The CLI at 80 columns (issue 24 items 8 and 9): the real ``gatekeeper`` process with COLUMNS=80 on
a real store of realistic rows (ULIDs seconds apart and a burst in one millisecond, long paths, long
tool names, several servers). No line is longer than 80 and no id, status, kind or tool name is
split; ``--wide`` shows every column whole; ids are taken by any unique prefix, as git takes hashes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gatekeeper.canonical import new_id
from gatekeeper.cli import cli
from gatekeeper.home import Home
from gatekeeper.store import store as store_module
from gatekeeper.store.lookup import MIN_SHORT, short_length
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from tests.helpers import PROOF, add_reviewer, draft, record_commit

REPO = Path(__file__).resolve().parent.parent
ROWS = [  # path, server, tool, size, what happens
    ("projects/2026/quarterly-planning/meeting-notes-with-the-whole-team.md", "notes", "create_note", 198_000, "pend"),
    (
        "inbox/a-very-long-title-that-an-agent-came-up-with-for-its-note.md",
        "vault",
        "obsidian_append_content",
        1234,
        "",
    ),
    ("journal/2026-12-04.md", "files", "write_file", 2473, "commit"),
    ("notes/short.md", "notes", "create_note", 12, "reject"),
    ("docs/architecture/decisions/0042-use-postgresql-for-team-mode.md", "files", "edit_file", 4941, "commit"),
    ("burst/one.md", "notes", "create_note", 10, ""),  # these two in the same millisecond: 10+ characters
    ("burst/two.md", "notes", "create_note", 10, ""),
]


@pytest.fixture
def realistic(home: Home, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Proposals with ids as a real day makes them: minutes apart, then a burst inside one millisecond."""
    times = iter([1_796_000_000_000 + k * 97_000 for k in range(5)] + [1_796_000_900_000] * 2)
    monkeypatch.setattr(store_module, "new_id", lambda: new_id(next(times)))
    ids = []
    with Store(home.db_path) as s:
        add_reviewer(s)
        for path, server, tool, size, fate in ROWS:
            p = s.propose(draft(path, b"x" * size, server=server, tool=tool))
            ids.append(p.id)
            if fate in ("commit", "reject"):
                reason = "too vague: say what the meeting decided" if fate == "reject" else None
                verdict = "rejected" if fate == "reject" else "approved"
                s.decide(
                    p.id, verdict=verdict, reviewer="alice", reason=reason, sha256=p.sha256, path=path, proof=PROOF
                )
            if fate == "commit":
                final = f"/home/someone/vaults/work-and-private-notes/{path}"
                record_commit(s, p.id, "created", observed_sha256=p.sha256, final_path=final)
    return ids


def gk(home: Home, *args: str, columns: str | None = "80") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env |= {"GATEKEEPER_HOME": str(home.path), "PYTHONPATH": str(REPO)} | ({"COLUMNS": columns} if columns else {})
    return subprocess.run(
        [sys.executable, "-m", "gatekeeper", *args], env=env, capture_output=True, text=True, timeout=60
    )


def fits(out: str, width: int = 80) -> list[str]:
    """The output's lines, after checking that each fits ``width``."""
    lines = out.splitlines()
    assert lines and all(len(line) <= width for line in lines), [line for line in lines if len(line) > width]
    return lines


def test_audit_proposals_fits_80_columns_with_short_ids_and_whole_words(home: Home, realistic: list[str]) -> None:
    run = gk(home, "audit", "proposals")
    assert run.returncode == 0, run.stderr
    lines = fits(run.stdout)
    statuses = {"pend": "pending", "commit": "committed", "reject": "rejected", "": "pending"}
    for pid, (path, _, _, _, fate) in zip(realistic, ROWS, strict=True):
        row = [line for line in lines if line.split()[0][:MIN_SHORT] == pid[:MIN_SHORT] and path[:20] in line]
        shown = row[0].split()[0]
        assert pid.startswith(shown) and MIN_SHORT <= len(shown) < 26, row
        assert row[0].split()[1:3] == [statuses[fate], "create"], row  # whole words, in their columns
        assert pid not in run.stdout
    assert re.search(
        r"^\S+\s+pending\s+create\s+projects/\S*\s+198 KB\s+(just now|\d+ min ago)$", run.stdout, re.M
    )  # item 8
    # The burst shares 10 characters, so every id is shown at 11 (git-style: shortest unique >= 8).
    assert {len(line.split()[0]) for line in lines[3:] if re.match(r"[0-9A-Z]{8}", line)} == {11}


def test_audit_proposals_wide_and_json_keep_every_exact_value(home: Home, realistic: list[str]) -> None:
    wide = gk(home, "audit", "proposals", "--wide")
    header = next(line for line in wide.stdout.splitlines() if line.startswith("id "))
    assert header.split() == ["id", "status", "mode", "server", "tool", "path", "size", "sha256", "created_at"]
    for pid, (path, server, tool, size, _) in zip(realistic, ROWS, strict=True):
        line = next(line for line in wide.stdout.splitlines() if line.startswith(pid))
        assert line.split()[2:7] == ["create", server, tool, path, str(size)]
    rows = [json.loads(line) for line in gk(home, "audit", "proposals", "--json").stdout.splitlines()]
    assert {r["id"]: r["size"] for r in rows} == {pid: row[3] for pid, row in zip(realistic, ROWS, strict=True)}
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", r["created_at"]) for r in rows)


def test_audit_show_and_log_fit_80_columns(home: Home, realistic: list[str]) -> None:
    pid = realistic[4]
    run = gk(home, "audit", "show", pid[:12].lower())  # a prefix, in any case
    assert run.returncode == 0, run.stderr
    lines = fits(run.stdout)
    assert lines[0] == f"proposal {pid}"
    said = {line.split()[0]: line for line in lines if line.strip()}
    assert re.fullmatch(r"status\s+committed", said["status"])
    assert re.fullmatch(r"size\s+4\.9 KB \(4,941 bytes, text\)", said["size"])
    assert re.fullmatch(r"created\s+\w{3} \d+ \w{3} \d\d:\d\d \(\S.*\)", said["created"])
    for kind in ("proposal_created", "decision", "commit_intent", "commit_outcome"):
        assert re.search(rf"^\s*\d+  \S.*  {kind}  ", run.stdout, re.M), kind
    log = gk(home, "audit", "log")
    lines = fits(log.stdout)
    events = [json.loads(line) for line in gk(home, "audit", "log", "--json").stdout.splitlines()]
    for event in events:  # one line each, every kind and actor whole
        line = next(line for line in lines if re.match(rf"\s*{event['seq']}  ", line))
        assert re.search(rf"  {event['kind']}\s+{re.escape(event['actor'])}\s", line), line
    wide = gk(home, "audit", "log", "--wide").stdout
    assert all(event["payload"] and json.dumps(event["payload"], separators=(",", ":")) in wide for event in events)


def test_policy_check_fits_80_columns(home: Home, tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "version: 1\nservers:\n"
        f"  notes:\n    command: {sys.executable}\n    args: [-m, gatekeeper.demo.notes_server, ./ws]\n"
        "    workspace: ws\n    tools:\n      read_note: allow\n      list_notes: allow\n"
        "      create_note: {propose: {path: {template: 'notes/{{ args.title | slug }}.md'}, "
        "content: {arg: body}, globs: ['notes/**/*.md']}}\n"
        f"  vault:\n    command: {sys.executable}\n    args: [-m, gatekeeper.demo.notes_server, ./ws]\n"
        "    workspace: ws\n    tools:\n      read_note: allow\n"
        "      search_notes: allow\n"
    )
    run = gk(home, "policy", "check", "--policy", str(policy))
    lines = fits(run.stdout)
    for host in ("notes__read_note", "notes__list_notes", "vault__read_note", "vault__search_notes"):
        assert any(re.fullmatch(rf"{host}\s+allow", line) for line in lines), (host, run.stdout)
    assert any(re.match(r"notes__create_note\s+propose\s+create\s+template:notes/", line) for line in lines)
    wide = gk(home, "policy", "check", "--policy", str(policy), "--wide").stdout
    assert next(line for line in wide.splitlines() if line.startswith("host name")).split("  ")[0] == "host name"
    assert re.search(
        r"notes__create_note\s+notes\s+create_note\s+propose\s+create\s+template:.*\s+arg:body\s+notes/", wide
    )


@pytest.fixture
def two_in_one_ms(home: Home, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    times = iter([1_796_000_000_000, 1_796_000_000_000, 1_796_000_777_000])
    monkeypatch.setattr(store_module, "new_id", lambda: new_id(next(times)))
    with Store(home.db_path) as s:
        yield sorted(s.propose(draft(f"notes/{n}.md", b"x\n")).id for n in ("a", "b", "c"))


def cli_run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_any_unique_prefix_names_a_proposal_as_git_does(home: Home, two_in_one_ms: list[str]) -> None:
    a, b, c = two_in_one_ms
    assert a[:10] == b[:10] and a[:8] != c[:8]
    code, out, _ = cli_run("audit", "show", c[:8], "--json")
    assert code == 0 and json.loads(out)["id"] == c
    unique = a[: next(i for i in range(10, len(a)) if a[i] != b[i]) + 1]  # a and b share 10 characters, or more
    code, out, _ = cli_run("audit", "log", "--proposal", unique.lower(), "--json")  # a unique prefix, any case
    assert code == 0 and {json.loads(line)["proposal_id"] for line in out.splitlines()} == {a}
    code, _, err = cli_run("audit", "show", a[:10])
    assert code == 2 and f"Error: ambiguous id prefix {a[:10]!r}: {a}, {b}" in err and "Traceback" not in err
    code, _, err = cli_run("audit", "log", "--proposal", a[:4])
    assert code == 2 and f"ambiguous id prefix {a[:4]!r}: {a}, {b}, {c}" in err
    code, _, err = cli_run("audit", "show", "01ZZZZ")
    assert code == 1 and "Error: no proposal 01ZZZZ" in err and "gatekeeper audit proposals" in err


def test_short_ids_grow_until_unique_in_the_whole_store(home: Home, two_in_one_ms: list[str]) -> None:
    a, b, c = two_in_one_ms
    with Reader(home.db_path) as reader:
        assert short_length(reader, [c]) == MIN_SHORT  # alone in its second
        common = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
        assert short_length(reader, [a]) == common + 1  # its neighbour is in the store, not on screen
        assert short_length(reader, [c, a]) == common + 1


def test_audit_log_last_n_and_unknown_kinds(home: Home, realistic: list[str]) -> None:
    every = [json.loads(line) for line in cli_run("audit", "log", "--json")[1].splitlines()]
    code, out, _ = cli_run("audit", "log", "-n", "3", "--json")
    assert code == 0 and [json.loads(line)["seq"] for line in out.splitlines()] == [e["seq"] for e in every[-3:]]
    code, out, _ = cli_run("audit", "log", "--kind", "decision", "--last", "1", "--json")
    assert [json.loads(line)["proposal_id"] for line in out.splitlines()] == [realistic[4]]
    code, _, err = cli_run("audit", "log", "-n", "0")
    assert code == 2 and "0 is not in the range x>=1" in err
    code, out, err = cli_run("audit", "log", "--kind", "decisions")
    assert code == 2 and out == ""
    assert "Invalid value for '--kind': no event kind 'decisions' (did you mean 'decision'?)" in err
    assert "the kinds are: " in err and "commit_outcome" in err and "proposal_created" in err
    with Store(home.db_path) as s:
        s.append_event("made_by_a_newer_version", "test", {})  # a kind in the log is a kind, registered or not
    code, out, _ = cli_run("audit", "log", "--kind", "made_by_a_newer_version", "--json")
    assert code == 0 and len(out.splitlines()) == 1

"""``gatekeeper revert``: a new proposal that restores what a committed proposal changed, and the
base bytes a person can always get back (``audit show --base``).

Committed proposals are made through the store's own calls (propose, decide, intent, outcome),
with the file step done by the test (the committer's change support is another helper's work).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gatekeeper.canonical import sha256_hex
from gatekeeper.cli import cli
from gatekeeper.commit.revert import REVERT_CLIENT, REVERT_TOOL, revert_rule, reverted_id
from gatekeeper.store import events as ev
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from tests.change_support import Place, place
from tests.helpers import PROOF, draft, record_commit

__all__ = ["place"]  # the fixture


def revert(place: Place, *args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(cli, ["revert", "--policy", str(place.policy), *args])
    assert result.exit_code == code, (result.output, result.stderr)
    assert "Traceback" not in result.output + result.stderr
    return result


def revert_json(place: Place, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(revert(place, "--json", *args).stdout)
    return out


# -- what the new proposal is, per mode --------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "old", "new"),
    [
        ("replace", b"old text\n", b"new text\n"),
        ("append", b"line 1\n", b"line 1\nline 2\n"),
        ("edit", b"colour: red\n\x00binary\xff", b"colour: blue\n\x00binary\xff"),
    ],
)
def test_revert_of_an_applied_change_replaces_the_result_with_the_base(
    place: Place, mode: str, old: bytes, new: bytes
) -> None:
    (place.workspace / "notes" / "a.md").write_bytes(old)
    pid = place.commit("notes/a.md", mode, new, old)
    result = revert(place, pid[:12].lower())  # any unique prefix of the id, as git takes one
    first = result.stdout.splitlines()
    assert first[0].startswith("Proposed: ") and f"replace notes/a.md, reverting {pid}" in first[0]
    new_id = first[0].split()[1]
    assert first[1] == f"Review it here: http://127.0.0.1:9876/proposals/{new_id}"
    d = place.detail(new_id)
    assert d["status"] == "pending" and d["mode"] == "replace"
    assert bytes(d["base"]) == new and d["base_sha256"] == sha256_hex(new) and d["base_size"] == len(new)
    assert bytes(d["content"]) == old and d["sha256"] == sha256_hex(old)
    assert d["tool"] == REVERT_TOOL and d["server"] == "notes" and d["client_name"] == REVERT_CLIENT
    assert json.loads(d["arguments"]) == {"revert": pid}
    assert d["workspace"] == str(place.workspace) and d["workspace_real"] == os.path.realpath(place.workspace)
    kinds = [(e["kind"], json.loads(e["payload"])) for e in d["events"]]
    assert [k for k, _ in kinds] == [ev.PROPOSAL_CREATED, ev.REVERT_PROPOSED]
    assert kinds[0][1]["mode"] == "replace" and kinds[0][1]["base_sha256"] == sha256_hex(new)
    assert kinds[1][1] == {"reverts": pid, "mode": "replace"}
    assert (place.workspace / "notes" / "a.md").read_bytes() == new  # nothing on disk changes


def test_revert_of_a_delete_creates_the_deleted_bytes(place: Place) -> None:
    old = b"gone but not lost\n"
    (place.workspace / "notes" / "a.md").write_bytes(old)
    pid = place.commit("notes/a.md", "delete", b"", old)
    out = revert_json(place, pid)
    assert out["mode"] == "create" and out["base_sha256"] is None and out["reverts"] == pid
    d = place.detail(out["proposal_id"])
    assert d["mode"] == "create" and d["base"] is None and bytes(d["content"]) == old
    assert out["review_url"].endswith(f"/proposals/{out['proposal_id']}")


def test_revert_of_a_create_deletes_the_created_file(place: Place) -> None:
    pid = place.commit("notes/new.md", "create", b"fresh\n")
    out = revert_json(place, pid)
    d = place.detail(out["proposal_id"])
    assert d["mode"] == "delete" and bytes(d["base"]) == b"fresh\n" and bytes(d["content"]) == b""
    assert d["size"] == 0 and d["base_sha256"] == sha256_hex(b"fresh\n")


def test_reverting_twice_while_pending_returns_the_same_proposal(place: Place) -> None:
    pid = place.commit("notes/new.md", "create", b"fresh\n")
    first = revert_json(place, pid)
    again = revert(place, pid).stdout
    assert again.startswith(f"Already pending: {first['proposal_id']} ")


# -- refusals ---------------------------------------------------------------------------------


def test_unknown_proposal_is_a_clear_error(place: Place) -> None:
    result = revert(place, "01NOSUCHPROPOSAL000000000", code=1)
    assert "Error: no proposal 01NOSUCHPROPOSAL000000000" in result.stderr


@pytest.mark.parametrize("state", ["pending", "rejected", "conflict"])
def test_only_a_committed_proposal_can_be_reverted(place: Place, state: str) -> None:
    with Store(place.home.db_path) as s:
        x = "notes/x.md"
        p = s.propose(dataclasses.replace(draft(x, b"x\n"), workspace=str(place.workspace)))
        if state != "pending":
            verdict = "approved" if state == "conflict" else "rejected"
            reason = "no" if verdict == "rejected" else None
            s.decide(p.id, verdict=verdict, reviewer="alice", sha256=p.sha256, path=x, reason=reason, proof=PROOF)
        if state == "conflict":
            record_commit(s, p.id, "conflict", detail="something already exists")
    result = revert(place, p.id, code=1)
    assert f"proposal {p.id} is {state}, not committed" in result.stderr
    assert "nothing to revert" in result.stderr


def test_a_file_changed_since_is_refused_unless_over_changes(place: Place) -> None:
    (place.workspace / "notes" / "a.md").write_bytes(b"v1\n")
    pid = place.commit("notes/a.md", "replace", b"v2\n", b"v1\n")
    (place.workspace / "notes" / "a.md").write_bytes(b"v3 by hand\n")
    result = revert(place, pid, code=1)
    assert f"notes/a.md changed after proposal {pid} changed it" in result.stderr
    assert "--over-changes" in result.stderr
    with Reader(place.home.db_path) as r:
        assert r.proposals(status="pending") == []  # nothing was proposed
    out = revert_json(place, "--over-changes", pid)
    d = place.detail(out["proposal_id"])
    assert d["mode"] == "replace" and bytes(d["base"]) == b"v3 by hand\n" and bytes(d["content"]) == b"v1\n"
    assert "changed after proposal" in out["note"]


def test_a_created_file_gone_since_has_nothing_to_revert(place: Place) -> None:
    pid = place.commit("notes/new.md", "create", b"fresh\n")
    (place.workspace / "notes" / "new.md").unlink()
    result = revert(place, pid, "--over-changes", code=1)
    assert "notes/new.md no longer exists" in result.stderr and "nothing to revert" in result.stderr


def test_a_deleted_file_that_is_back_is_refused_unless_over_changes(place: Place) -> None:
    (place.workspace / "notes" / "a.md").write_bytes(b"old\n")
    pid = place.commit("notes/a.md", "delete", b"", b"old\n")
    (place.workspace / "notes" / "a.md").write_bytes(b"someone else's\n")
    assert "exists again since proposal" in revert(place, pid, code=1).stderr
    d = place.detail(revert_json(place, "--over-changes", pid)["proposal_id"])
    assert d["mode"] == "replace" and bytes(d["base"]) == b"someone else's\n" and bytes(d["content"]) == b"old\n"


def test_a_changed_file_removed_since_is_recreated_only_over_changes(place: Place) -> None:
    (place.workspace / "notes" / "a.md").write_bytes(b"v1\n")
    pid = place.commit("notes/a.md", "edit", b"v2\n", b"v1\n")
    (place.workspace / "notes" / "a.md").unlink()
    result = revert(place, pid, code=1)
    assert "notes/a.md no longer exists: it was removed after proposal" in result.stderr
    d = place.detail(revert_json(place, "--over-changes", pid)["proposal_id"])
    assert d["mode"] == "create" and d["base"] is None and bytes(d["content"]) == b"v1\n"


def test_a_workspace_that_now_leads_elsewhere_is_refused(place: Place, tmp_path: Path) -> None:
    pid = place.commit("notes/new.md", "create", b"fresh\n")
    place.workspace.rename(tmp_path / "moved")
    (tmp_path / "decoy" / "notes").mkdir(parents=True)
    (tmp_path / "decoy" / "notes" / "new.md").write_bytes(b"fresh\n")
    place.workspace.symlink_to(tmp_path / "decoy")
    result = revert(place, pid, code=1)
    assert f"the workspace {place.workspace} now resolves to {tmp_path / 'decoy'}" in result.stderr


def test_a_revert_can_itself_be_reverted(place: Place) -> None:
    (place.workspace / "notes" / "a.md").write_bytes(b"v1\n")
    pid = place.commit("notes/a.md", "replace", b"v2\n", b"v1\n")
    undo = revert_json(place, pid)
    with Store(place.home.db_path) as s:  # the revert approved and committed as filed
        s.decide(
            undo["proposal_id"],
            verdict="approved",
            reviewer="alice",
            sha256=undo["sha256"],
            path="notes/a.md",
            mode="replace",
            base_sha256=undo["base_sha256"],
            proof=PROOF,
        )
        (place.workspace / "notes" / "a.md").write_bytes(b"v1\n")
        record_commit(s, undo["proposal_id"], "applied", observed_sha256=undo["sha256"])
    again = place.detail(revert_json(place, undo["proposal_id"])["proposal_id"])
    assert again["mode"] == "replace" and bytes(again["base"]) == b"v1\n" and bytes(again["content"]) == b"v2\n"
    assert json.loads(again["arguments"]) == {"revert": undo["proposal_id"]}


@pytest.mark.parametrize("what", ["symlink", "folder", "fifo"])
def test_a_destination_that_is_no_longer_a_file_is_refused(place: Place, what: str, tmp_path: Path) -> None:
    pid = place.commit("notes/new.md", "create", b"fresh\n")
    target = place.workspace / "notes" / "new.md"
    target.unlink()
    if what == "symlink":
        (tmp_path / "elsewhere").write_bytes(b"fresh\n")
        target.symlink_to(tmp_path / "elsewhere")
    elif what == "folder":
        target.mkdir()
    else:
        os.mkfifo(target)
    result = revert(place, pid, "--over-changes", code=1)
    assert "Error: notes/new.md is now" in result.stderr and "a revert only restores a regular file" in result.stderr
    assert f"gatekeeper audit show {pid} --base" in result.stderr or what != "symlink"


# -- the base bytes are always recoverable ----------------------------------------------------


def test_audit_show_base_prints_the_exact_replaced_bytes(place: Place) -> None:
    old = bytes(range(256)) + b"\r\n\x00 trailing"
    (place.workspace / "notes" / "a.bin").write_bytes(old)
    pid = place.commit("notes/a.bin", "replace", b"new\n", old)
    out = CliRunner().invoke(cli, ["audit", "show", pid, "--base"])
    assert out.exit_code == 0 and out.stdout_bytes == old
    shown = json.loads(CliRunner().invoke(cli, ["audit", "show", pid, "--base", "--json"]).stdout)
    assert base64.b64decode(shown["base_base64"]) == old and "base" not in shown
    assert shown["mode"] == "replace" and shown["base_sha256"] == sha256_hex(old)
    assert CliRunner().invoke(cli, ["audit", "show", pid, "--content"]).stdout_bytes == b"new\n"


def test_audit_show_base_of_a_create_says_there_is_none(place: Place) -> None:
    pid = place.commit("notes/new.md", "create", b"fresh\n")
    result = CliRunner().invoke(cli, ["audit", "show", pid, "--base"])
    assert result.exit_code == 2
    assert f"proposal {pid} is a create: it replaced nothing" in result.stderr


def test_audit_show_and_list_name_mode_base_and_outcome(place: Place) -> None:
    (place.workspace / "notes" / "a.md").write_bytes(b"before\n")
    applied = place.commit("notes/a.md", "edit", b"after\n", b"before\n")
    deleted = place.commit("notes/a.md", "delete", b"", b"after\n")
    text = CliRunner().invoke(cli, ["audit", "show", applied]).stdout
    assert "mode" in text and " edit" in text
    assert sha256_hex(b"before\n") in text and "7 bytes (the file before" in text
    assert "result sha256" in text and sha256_hex(b"after\n") in text
    assert "applied at" in text
    text = CliRunner().invoke(cli, ["audit", "show", deleted]).stdout
    assert " delete" in text and "deleted at" in text and "result sha256" not in text
    assert sha256_hex(b"after\n") in text
    listing = CliRunner().invoke(cli, ["audit", "proposals", "--wide"]).stdout
    rows = {line.split()[0]: line for line in listing.splitlines() if applied in line or deleted in line}
    assert " edit " in rows[applied] and " delete " in rows[deleted]


# -- for the committer: which rule a revert proposal is checked against --------------------------


def test_a_revert_is_checked_against_the_rule_that_allows_its_path(place: Place) -> None:
    from gatekeeper.policy import load_policy

    policy = load_policy(place.policy)
    rule = revert_rule(policy, "notes", "notes/a.md")
    assert rule is policy.rule("notes", "create_note")
    assert revert_rule(policy, "notes", "elsewhere/a.md") is None  # no rule allows it any more
    assert revert_rule(policy, "gone", "notes/a.md") is None
    assert reverted_id(REVERT_TOOL, {"revert": "01ABC"}) == "01ABC"
    assert reverted_id("create_note", {"revert": "01ABC"}) is None

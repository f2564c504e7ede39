"""Changes in the audit: ``audit verify --files`` compares each destination with its LATEST
committed proposal (a later approved change is not tampering, a later delete means absent), and
``gatekeeper_proposal_status`` tells the agent a change's mode and outcome (through a real proxy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gatekeeper.cli import cli
from gatekeeper.home import Home
from tests.proxy_support import proxied, write_policy
from tests.test_revert import Place, place

__all__ = ["place"]


def verify_files(*extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["audit", "verify", "--files", *extra])
    return result.exit_code, result.stdout


def test_a_later_approved_change_is_what_the_file_should_be(place: Place) -> None:
    target = place.workspace / "notes" / "a.md"
    place.commit("notes/a.md", "create", b"one\n")
    place.commit("notes/a.md", "append", b"one\ntwo\n", b"one\n")
    edited = place.commit("notes/a.md", "edit", b"one\n2\n", b"one\ntwo\n")
    code, out = verify_files()
    assert code == 0, out
    assert "OK: 1 committed file(s) checked, 0 problem(s)" in out
    target.write_bytes(b"one\ntwo\n")  # back to an earlier approved state: not what the latest left
    code, out = verify_files()
    assert code == 1 and f"FILE changed: {target} (proposal {edited})" in out


def test_a_later_delete_means_the_file_should_be_absent(place: Place) -> None:
    target = place.workspace / "notes" / "a.md"
    place.commit("notes/a.md", "create", b"one\n")
    place.commit("notes/b.md", "create", b"kept\n")
    deleted = place.commit("notes/a.md", "delete", b"", b"one\n")
    code, out = verify_files()
    assert code == 0, out
    assert "2 committed file(s) checked, 0 problem(s)" in out
    target.write_bytes(b"one\n")  # the very bytes that were approved once, but deleted since
    code, out = verify_files("--json")
    report = json.loads(out)
    assert code == 1 and report["files_checked"] == 2
    assert report["file_problems"] == [
        {"proposal_id": deleted, "path": str(target), "problem": "present after its deletion"}
    ]


def test_a_file_created_again_after_a_delete_is_checked_as_created(place: Place) -> None:
    place.commit("notes/a.md", "create", b"one\n")
    place.commit("notes/a.md", "delete", b"", b"one\n")
    again = place.commit("notes/a.md", "create", b"born again\n")
    assert verify_files()[0] == 0
    (place.workspace / "notes" / "a.md").unlink()
    code, out = verify_files()
    assert code == 1 and f"FILE missing: {place.workspace / 'notes' / 'a.md'} (proposal {again})" in out


# -- what the agent sees ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_proposal_status_tells_a_change_its_mode_and_outcome(place: Place, tmp_path: Path, home: Home) -> None:
    (place.workspace / "notes" / "a.md").write_bytes(b"old\n")
    applied = place.commit("notes/a.md", "replace", b"new\n", b"old\n")
    deleted = place.commit("notes/a.md", "delete", b"", b"new\n")
    created = place.commit("notes/c.md", "create", b"c\n")
    policy = write_policy(tmp_path / "proxy")
    async with proxied(policy, home.path) as p:
        answers = {
            pid: await p.call_tool("gatekeeper_proposal_status", {"proposal_id": pid})
            for pid in (applied, deleted, created)
        }
    target = str(place.workspace / "notes" / "a.md")
    a = answers[applied].structured_content
    assert a["status"] == "committed" and a["outcome"] == "applied" and a["mode"] == "replace"
    assert a["base_size"] == 4 and a["base_sha256"] and a["size"] == 4
    assert f"committed: the replace was applied to {target}" in answers[applied].content[0].text  # type: ignore[union-attr]
    d = answers[deleted].structured_content
    assert d["status"] == "committed" and d["outcome"] == "deleted" and d["mode"] == "delete" and d["size"] == 0
    assert f"committed: the file was deleted ({target})" in answers[deleted].content[0].text  # type: ignore[union-attr]
    c = answers[created].structured_content
    assert c["outcome"] == "created" and "mode" not in c and "base_sha256" not in c  # a create's answer as before
    assert "committed: the file exists at" in answers[created].content[0].text  # type: ignore[union-attr]

"""A committer run that recovers leaves no temporary file behind (issue 24, item 17).

A change's or delete's temporary name (``.gatekeeper-<id>.new``) holds the base bytes until its
outcome is recorded, and is removed just after. Killed in between (``after_outcome``), the
committer left it, and the next run, with nothing to finish for that proposal, left it too, until
the next change in that folder was committed. Killed (-9) at each step that leaves such a name,
then run again: the workspace holds the approved result and no ``.gatekeeper-*`` name, the home
no note of one (gatekeeper/commit/leftovers.py), and the outcome is the one recorded once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.commit_support import World, make_world, run_commit
from tests.test_commit_changes import BASE, existing, temp_names

# The steps after which a temporary name exists (the others leave none to clean).
POINTS = (
    "after_tmp_link",
    "after_exchange",
    "after_move_aside",
    "after_dir_fsync",
    "before_outcome",
    "outcome_row_written",
    "after_outcome",
)
ONLY = {"after_move_aside": True, "after_tmp_link": False, "after_exchange": False}  # True: deletes only
RESULTS = {"replace": b"a whole new file\n", "append": BASE + b"line three\n", "delete": b""}


@pytest.fixture
def world(tmp_path: Path) -> World:
    w = make_world(tmp_path / "w")
    (w.workspace / "notes" / "deep").mkdir(parents=True)
    return w


def notes(w: World) -> list[str]:
    return sorted(p.name for p in w.home.path.glob("commit-*.leftovers"))


CASES = [(m, p) for p in POINTS for m in sorted(RESULTS) if ONLY.get(p, m == "delete") == (m == "delete")]


@pytest.mark.parametrize(("mode", "point"), CASES)
def test_a_recovering_run_leaves_no_temporary_name(world: World, mode: str, point: str) -> None:
    target = existing(world, "notes/deep/a.md")
    (world.workspace / "notes" / "deep" / "b.md").write_bytes(b"stays\n")
    pid = world.propose("notes/deep/a.md", RESULTS[mode], mode=mode, base=BASE)
    killed = run_commit(world, "--once", GATEKEEPER_CRASH_AT=f"{point}:1")
    assert killed.killed, (killed.code, killed.err)
    assert temp_names(world) == [f".gatekeeper-{pid}.new"]  # what the kill left

    again = run_commit(world, "--once")
    assert again.code == 0, again.err
    assert temp_names(world) == [], "the recovering run left a temporary name"
    assert notes(world) == []
    recorded = world.db_rows("SELECT outcome FROM commit_record WHERE proposal_id = ?", pid)
    assert recorded == [("deleted",)] if mode == "delete" else recorded == [("applied",)]
    if mode == "delete":
        assert not target.exists()
    else:
        assert target.read_bytes() == RESULTS[mode]
    assert (world.workspace / "notes" / "deep" / "b.md").read_bytes() == b"stays\n"


def test_a_note_of_another_servers_committer_is_left_to_it(world: World) -> None:
    """``commit --server X`` sweeps only X's notes: another server's committer may be running."""
    other = world.home.path / "commit-elsewhere.leftovers"
    other.write_text(f'[["{world.workspace}", "notes"]]')
    assert run_commit(world, "--once", "--server", "notes").code == 0
    assert other.exists()
    assert run_commit(world, "--once").code == 0  # a committer of every server sweeps it
    assert not other.exists()

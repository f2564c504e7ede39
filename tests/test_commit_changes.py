"""Changes to existing files through real committer processes: replace, append, edit and delete
by compare-and-swap over the approved base; conflicts when the file changed (before approval,
between approval and commit, during the swap); recovery after a kill at each new step.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gatekeeper.commit.swap import tmp_name
from tests.commit_support import Committer, World, commit_env, make_world, run_commit, snapshot, wait_for

BASE = b"line one\nline two\n"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = make_world(tmp_path / "w")
    (w.workspace / "notes").mkdir()
    (w.outside / "target.md").write_bytes(b"outside\n")
    outside_before = snapshot(w.outside)
    yield w
    assert snapshot(w.outside) == outside_before, "something was written outside the workspace"


def commit(w: World, code: int = 0, **switches: str) -> str:
    run = run_commit(w, "--once", **switches)
    assert run.code == code, (run.code, run.out, run.err)
    return run.out + run.err


def outcome(w: World, pid: str) -> tuple[str, str]:
    rec = w.outcome(pid)
    assert rec is not None, f"no outcome for {pid}"
    return rec[0], rec[1]


def temp_names(w: World) -> list[str]:
    return sorted(p.name for p in w.workspace.rglob(".gatekeeper-*"))


def existing(w: World, rel: str, data: bytes = BASE, mode: int = 0o640) -> Path:
    p = w.workspace / rel
    p.write_bytes(data)
    os.chmod(p, mode)
    return p


CHANGES = {
    "replace": b"a whole new file\n",
    "append": BASE + b"line three\n",
    "edit": b"line one\nline 2\n",
}


@pytest.mark.parametrize("mode", sorted(CHANGES))
def test_a_change_is_swapped_in_keeping_the_files_mode(world: World, mode: str) -> None:
    p = existing(world, "notes/a.md")
    ino = p.stat().st_ino
    pid = world.propose("notes/a.md", CHANGES[mode], mode=mode, base=BASE)
    out = commit(world)
    assert outcome(world, pid)[0] == "applied"
    assert p.read_bytes() == CHANGES[mode]
    assert stat.S_IMODE(p.stat().st_mode) == 0o640, "the file's own mode was not kept"
    assert p.stat().st_ino != ino, "written in place instead of swapped"
    assert temp_names(world) == []
    assert f"applied   {pid}" in out
    # the old bytes stay in the store, byte for byte
    ((base, base_sha),) = world.db_rows("SELECT base, base_sha256 FROM proposal WHERE id = ?", pid)
    assert bytes(base) == BASE and hashlib.sha256(BASE).hexdigest() == base_sha


def test_the_rules_explicit_file_mode_wins(world: World) -> None:
    p = existing(world, "notes/a.md", mode=0o664)
    pid = world.propose("notes/a.md", b"private now\n", mode="replace", base=BASE, tool="replace_private")
    commit(world)
    assert outcome(world, pid)[0] == "applied"
    assert stat.S_IMODE(p.stat().st_mode) == 0o600


def test_delete_removes_only_the_file(world: World) -> None:
    p = existing(world, "notes/a.md")
    (world.workspace / "notes" / "b.md").write_bytes(b"stays\n")
    pid = world.propose("notes/a.md", b"", mode="delete", base=BASE)
    out = commit(world)
    assert outcome(world, pid)[0] == "deleted"
    assert not p.exists() and (world.workspace / "notes" / "b.md").read_bytes() == b"stays\n"
    assert temp_names(world) == []
    assert f"deleted   {pid}" in out


@pytest.mark.parametrize("mode", [*sorted(CHANGES), "delete"])
def test_changed_between_proposal_and_approval(world: World, mode: str) -> None:
    p = existing(world, "notes/a.md")
    pid = world.propose("notes/a.md", CHANGES.get(mode, b""), mode=mode, base=BASE, verdict=None)
    p.write_bytes(b"someone else's edit\n")
    world.decide(pid)
    commit(world)
    kind, detail = outcome(world, pid)
    assert kind == "conflict" and "changed since it was proposed" in detail and "nothing was written" in detail
    assert p.read_bytes() == b"someone else's edit\n"
    assert temp_names(world) == []


@pytest.mark.parametrize("mode", [*sorted(CHANGES), "delete"])
def test_changed_between_approval_and_commit(world: World, mode: str) -> None:
    p = existing(world, "notes/a.md")
    pid = world.propose("notes/a.md", CHANGES.get(mode, b""), mode=mode, base=BASE)
    p.write_bytes(b"late edit\n")
    commit(world)
    assert outcome(world, pid)[0] == "conflict"
    assert p.read_bytes() == b"late edit\n"


def paused(w: World, point: str, tmp: Path, **switches: str) -> tuple[Committer, Path]:
    prefix = tmp / f"pause-{point}"
    c = Committer(w, ["--once"], commit_env(w, GATEKEEPER_PAUSE_AT=f"{point}:1:{prefix}", **switches))
    assert wait_for(lambda: Path(f"{prefix}.paused").exists(), timeout=30), "the committer never paused"
    return c, prefix


@pytest.mark.parametrize("how", ["rewrite in place", "rename over", "remove", "folder"])
@pytest.mark.parametrize("mode", sorted(CHANGES))
def test_changed_during_the_swap(world: World, tmp_path: Path, mode: str, how: str) -> None:
    """The committer has checked the base and linked its result under the temporary name when another
    writer changes the file: the exchange brings the other bytes out, they are not the base, they go back."""
    p = existing(world, "notes/a.md")
    pid = world.propose("notes/a.md", CHANGES[mode], mode=mode, base=BASE)
    c, prefix = paused(world, "after_tmp_link", tmp_path)
    assert (world.workspace / "notes" / tmp_name(pid)).read_bytes() == CHANGES[mode]
    if how == "rewrite in place":
        p.write_bytes(b"theirs\n")
    elif how == "rename over":
        (world.workspace / "notes" / "x").write_bytes(b"theirs\n")
        os.rename(world.workspace / "notes" / "x", p)
    elif how == "remove":
        p.unlink()
    else:
        p.unlink()
        p.mkdir()
    Path(f"{prefix}.resume").touch()
    run = c.wait()
    assert run.code == 0, run.err
    kind, detail = outcome(world, pid)
    assert kind == "conflict", detail
    if how == "folder":
        assert p.is_dir()
    elif how == "remove":
        assert not p.exists()
    else:
        assert p.read_bytes() == b"theirs\n", "the other writer's bytes were lost"
    assert temp_names(world) == []


def test_changed_during_a_delete(world: World, tmp_path: Path) -> None:
    p = existing(world, "notes/a.md")
    pid = world.propose("notes/a.md", b"", mode="delete", base=BASE)
    c, prefix = paused(world, "after_open_parent", tmp_path)
    p.write_bytes(b"theirs\n")
    Path(f"{prefix}.resume").touch()
    assert c.wait().code == 0
    assert outcome(world, pid)[0] == "conflict"
    assert p.read_bytes() == b"theirs\n"


@pytest.mark.parametrize("what", ["missing", "symlink", "folder", "fifo", "no folder"])
@pytest.mark.parametrize("mode", ["replace", "delete"])
def test_destination_not_a_regular_file(world: World, what: str, mode: str) -> None:
    rel = "notes/gone/a.md" if what == "no folder" else "notes/a.md"
    p = world.workspace / rel
    if what == "symlink":
        p.symlink_to(world.outside / "target.md")
    elif what == "folder":
        p.mkdir()
    elif what == "fifo":
        os.mkfifo(p)
    pid = world.propose(rel, b"" if mode == "delete" else b"new\n", mode=mode, base=BASE)
    commit(world)
    kind, detail = outcome(world, pid)
    assert kind == "conflict", detail
    expected = {"missing": "no longer exists", "symlink": "symbolic link", "folder": "is now a folder"}
    expected |= {"fifo": "FIFO", "no folder": "no longer exists"}
    assert expected[what] in detail
    assert (world.outside / "target.md").read_bytes() == b"outside\n"


def test_a_policy_that_no_longer_allows_the_mode_refuses(world: World) -> None:
    existing(world, "notes/a.md")
    pid = world.propose("notes/a.md", b"new\n", mode="replace", base=BASE)
    world.policy.write_text(world.policy.read_text().replace("mode: replace, path", "mode: append, path", 1))
    commit(world)
    kind, detail = outcome(world, pid)
    assert kind == "refused" and "replace existing files" in detail and "'append'" in detail
    assert (world.workspace / "notes" / "a.md").read_bytes() == BASE


# -- recovery after kills at each new step ------------------------------------------------------

APPENDED = BASE + b"line three\n"


@pytest.mark.parametrize(
    "point",
    [
        "after_intent",
        "after_open_parent",
        "after_tmp_open",
        "after_tmp_write",
        "after_tmp_fsync",
        "after_tmp_link",
        "after_exchange",
        "after_dir_fsync",
        "before_outcome",
        "outcome_row_written",
        "after_outcome",
    ],
)
def test_an_append_killed_anywhere_is_applied_exactly_once(world: World, point: str) -> None:
    p = existing(world, "notes/a.md")
    pid = world.propose("notes/a.md", APPENDED, mode="append", base=BASE)
    run = run_commit(world, "--once", GATEKEEPER_CRASH_AT=f"{point}:1")
    assert run.killed
    assert p.read_bytes() in (BASE, APPENDED), "a reader saw a torn file"
    for _ in range(2):  # recovery, then a run with nothing to do
        commit(world)
        assert p.read_bytes() == APPENDED and p.read_bytes().count(b"line three") == 1
    kind, _ = outcome(world, pid)
    assert kind == "applied"
    assert temp_names(world) == []  # even after_outcome (recorded, not yet cleaned): tests/test_commit_leftovers.py
    assert world.db_rows("SELECT count(*) FROM audit_event WHERE proposal_id = ? AND kind = 'commit_intent'", pid) == [
        (1,)
    ]


def test_swapped_but_not_recorded_is_finished_from_the_temporary_name(world: World) -> None:
    p = existing(world, "notes/a.md")
    pid = world.propose("notes/a.md", APPENDED, mode="append", base=BASE)
    assert run_commit(world, "--once", GATEKEEPER_CRASH_AT="after_exchange:1").killed
    assert (world.workspace / "notes" / tmp_name(pid)).read_bytes() == BASE  # the evidence
    commit(world)
    kind, detail = outcome(world, pid)
    assert kind == "applied" and "already swapped" in detail
    assert p.read_bytes() == APPENDED


def test_a_stale_temporary_name_is_swept(world: World) -> None:
    """Killed after recording, before removing the temporary name: the next change in the folder sweeps it."""
    existing(world, "notes/a.md")
    pid = world.propose("notes/a.md", APPENDED, mode="append", base=BASE)
    assert run_commit(world, "--once", GATEKEEPER_CRASH_AT="after_outcome:1").killed
    assert outcome(world, pid)[0] == "applied"
    assert temp_names(world) == [tmp_name(pid)]
    existing(world, "notes/b.md")
    other = world.propose("notes/b.md", b"b\n", mode="replace", base=BASE)
    commit(world)
    assert outcome(world, other)[0] == "applied"
    assert temp_names(world) == []


def test_killed_during_a_delete_is_finished(world: World) -> None:
    p = existing(world, "notes/a.md")
    pid = world.propose("notes/a.md", b"", mode="delete", base=BASE)
    assert run_commit(world, "--once", GATEKEEPER_CRASH_AT="after_move_aside:1").killed
    assert not p.exists() and (world.workspace / "notes" / tmp_name(pid)).read_bytes() == BASE
    commit(world)
    assert outcome(world, pid)[0] == "deleted"
    assert not p.exists() and temp_names(world) == []


def test_a_delete_whose_aside_bytes_differ_is_put_back(world: World, tmp_path: Path) -> None:
    """Killed after moving aside; meanwhile the moved file is rewritten: recovery puts it back."""
    p = existing(world, "notes/a.md")
    pid = world.propose("notes/a.md", b"", mode="delete", base=BASE)
    assert run_commit(world, "--once", GATEKEEPER_CRASH_AT="after_move_aside:1").killed
    (world.workspace / "notes" / tmp_name(pid)).write_bytes(b"theirs\n")
    commit(world)
    assert outcome(world, pid)[0] == "conflict"
    assert p.read_bytes() == b"theirs\n" and temp_names(world) == []


def test_a_delete_put_back_leaves_both_when_the_name_was_taken(world: World) -> None:
    p = existing(world, "notes/a.md")
    pid = world.propose("notes/a.md", b"", mode="delete", base=BASE)
    assert run_commit(world, "--once", GATEKEEPER_CRASH_AT="after_move_aside:1").killed
    aside = world.workspace / "notes" / tmp_name(pid)
    aside.write_bytes(b"theirs\n")
    p.write_bytes(b"newcomer\n")
    commit(world)
    kind, detail = outcome(world, pid)
    assert kind == "conflict" and "both were left" in detail
    assert p.read_bytes() == b"newcomer\n" and aside.read_bytes() == b"theirs\n"


def test_changes_and_creates_in_one_batch(tmp_path: Path) -> None:
    w = make_world(tmp_path / "w")
    (w.workspace / "notes").mkdir()
    pids = {}
    for i in range(6):
        existing(w, f"notes/e{i}.md")
        pids[f"notes/e{i}.md"] = w.propose(f"notes/e{i}.md", BASE + b"more\n", mode="append", base=BASE)
        pids[f"notes/n{i}.md"] = w.propose(f"notes/n{i}.md", b"new\n")
    commit(w)
    for path, pid in pids.items():
        assert outcome(w, pid)[0] == ("applied" if "/e" in path else "created")
        assert (w.workspace / path).read_bytes() == (BASE + b"more\n" if "/e" in path else b"new\n")


def test_outcome_lines_of_the_cli_and_of_up(world: World) -> None:
    """`gatekeeper commit` says where the change went; `gatekeeper up`'s log calls it committed."""
    import json

    from gatekeeper.store import events as ev
    from gatekeeper.up.supervise import describe

    existing(world, "notes/a.md")
    existing(world, "notes/b.md")
    applied = world.propose("notes/a.md", b"new\n", mode="replace", base=BASE)
    deleted = world.propose("notes/b.md", b"", mode="delete", base=BASE)
    out = commit(world)
    assert f"applied   {applied}  notes/a.md  changed: {world.workspace / 'notes/a.md'}" in out
    assert f"deleted   {deleted}  notes/b.md  removed: {world.workspace / 'notes/b.md'}" in out
    assert "Done: 0 created, 1 applied, 1 deleted, 0 conflict, 0 refused, 0 failed." in out
    lines = {
        pid: describe(ev.COMMIT_OUTCOME, pid, json.loads(payload))
        for pid, payload in world.db_rows("SELECT proposal_id, payload FROM audit_event WHERE kind = 'commit_outcome'")
    }
    assert lines[applied] == f"committed {applied}  {world.workspace / 'notes/a.md'} (changed)"
    assert lines[deleted] == f"committed {deleted}  {world.workspace / 'notes/b.md'} (deleted)"


def test_create_if_missing_lets_a_replace_rule_create(world: World) -> None:
    """A replace rule with create_if_missing: a missing destination was proposed as a create, which
    the committer accepts under that rule; under a plain replace rule the same create is refused."""
    ok = world.propose("notes/new.md", b"made\n", tool="replace_or_create")
    no = world.propose("notes/other.md", b"made\n", tool="replace_note")
    commit(world)
    assert outcome(world, ok)[0] == "created" and (world.workspace / "notes/new.md").read_bytes() == b"made\n"
    kind, detail = outcome(world, no)
    assert kind == "refused" and "create files" in detail
    assert not (world.workspace / "notes/other.md").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another owner needs root (CAP_CHOWN)")
def test_a_change_keeps_the_files_owner(world: World) -> None:
    p = existing(world, "notes/a.md")
    os.chown(p, 1234, 2345)
    pid = world.propose("notes/a.md", b"new\n", mode="replace", base=BASE)
    commit(world)
    assert outcome(world, pid)[0] == "applied"
    st = p.stat()
    assert (st.st_uid, st.st_gid) == (1234, 2345)


def test_a_symlinked_folder_on_the_way_is_a_conflict(world: World) -> None:
    (world.workspace / "evil").symlink_to(world.outside)
    world.write_policy(globs=["notes/**", "evil/**"])
    pid = world.propose("evil/target.md", b"changed?\n", mode="replace", base=b"outside\n")
    commit(world)
    kind, detail = outcome(world, pid)
    assert kind == "conflict" and "symbolic link" in detail


def test_readers_only_ever_see_a_whole_version(world: World) -> None:
    """Five approved replaces in a row over a 1 MiB file while a reader reads it without pause:
    every read is exactly one of the versions, never a mix, never missing."""
    import threading

    versions = [bytes([65 + k]) * (1 << 20) for k in range(6)]
    p = existing(world, "notes/big.md", versions[0])
    for k in range(5):
        world.propose("notes/big.md", versions[k + 1], mode="replace", base=versions[k])
    seen: set[bytes] = set()
    bad: list[str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                data = p.read_bytes()
            except FileNotFoundError:
                bad.append("missing")
                continue
            if data in versions:
                seen.add(data[:1])
            else:
                bad.append(f"{len(data)} bytes, a mix")

    t = threading.Thread(target=read)
    t.start()
    try:
        commit(world)
    finally:
        stop.set()
        t.join()
    assert not bad, bad[:3]
    assert p.read_bytes() == versions[5] and len(seen) >= 2


def test_a_base_over_the_rules_max_bytes_is_refused(world: World) -> None:
    big = b"x" * (1048576 + 1)
    p = existing(world, "notes/big.md", big)
    pid = world.propose("notes/big.md", b"small now\n", mode="replace", base=big)
    commit(world)
    kind, detail = outcome(world, pid)
    assert kind == "refused" and "over the rule's max_bytes" in detail and "1,048,577" in detail
    assert p.read_bytes() == big


@pytest.mark.parametrize(("mode", "said"), [("replace", "the change was swapped in at"), ("delete", "was deleted")])
def test_a_failed_folder_fsync_after_a_change_is_failed_and_says_what_was_done(
    world: World, mode: str, said: str
) -> None:
    existing(world, "notes/a.md")
    pid = world.propose("notes/a.md", b"" if mode == "delete" else b"new\n", mode=mode, base=BASE)
    commit(world, code=1, GATEKEEPER_INJECT="fsync_eio:dir")
    kind, detail = outcome(world, pid)
    assert kind == "failed" and said in detail and "may not survive a power loss" in detail, detail


def test_a_failed_file_fsync_writes_nothing(world: World) -> None:
    p = existing(world, "notes/a.md")
    pid = world.propose("notes/a.md", b"new\n", mode="replace", base=BASE)
    commit(world, code=1, GATEKEEPER_INJECT="fsync_eio:file")
    kind, detail = outcome(world, pid)
    assert kind == "failed" and "was not changed" in detail
    assert p.read_bytes() == BASE

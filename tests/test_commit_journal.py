"""Issue 24 item 14: a database writer without keys cannot make an approval apply twice.

The attacker has the database (SQLite: the file, its guard triggers dropped with plain ``sqlite3``;
PostgreSQL: a superuser session with ``session_replication_role = replica``, which fires no
trigger) and no key. They delete an applied proposal's ``commit_record`` row and its
``commit_intent`` / ``commit_outcome`` events, renumber and rehash the chain (it verifies again on
its own), and wait for the committer. The committer's own journal in its home
(``commit/journal.py``) refuses: an event, exit status 1, nothing written, every time after.
Committers are real processes (``run_commit``); the databases are real.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gatekeeper.cli import cli
from gatekeeper.commit.journal import COMPACT_AFTER, Entry, Journal
from tests.commit_support import Committer, World, commit_env, make_world, run_commit, wait_for
from tests.pg_support import BACKENDS
from tests.tamper_support import cut_events, unguarded


@pytest.fixture(params=BACKENDS)
def world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    database = request.getfixturevalue("postgres_database") if request.param == "postgres" else None
    return make_world(tmp_path / "w", database)


def erase_commit(world: World, pid: str, kinds: tuple[str, ...] = ("commit_intent", "commit_outcome")) -> None:
    """Delete ``pid``'s commit_record row and its commit events; renumber and rehash the chain.
    With ``kinds``: only those events of ``pid``, and the row stays."""
    with unguarded(world.home.database) as conn:
        if "commit_outcome" in kinds and "commit_intent" in kinds:
            conn.execute("DELETE FROM commit_record WHERE proposal_id = ?", (pid,))
        assert cut_events(conn, lambda r: r[4] == pid and r[2] in kinds) == len(kinds)


def count(world: World, kind: str, pid: str) -> int:
    ((n,),) = world.db_rows("SELECT count(*) FROM audit_event WHERE kind = ? AND proposal_id = ?", kind, pid)
    return int(n)


def journal(world: World) -> list[dict[str, Any]]:
    lines = (world.home.path / "commit-journal").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.timeout(120)
def test_an_erased_create_is_not_created_a_second_time(world: World) -> None:
    pid = world.propose("notes/once.md", b"once\n")
    assert run_commit(world).code == 0 and world.outcome(pid)[0] == "created"  # type: ignore[index]
    (world.workspace / "notes" / "once.md").unlink()  # the person filed the note elsewhere since
    erase_commit(world, pid)
    for attempt in (1, 2):  # and every time after
        run = run_commit(world)
        assert run.code == 1, run.err
        why = "this committer's journal has it applied" if attempt == 1 else "this committer refused it before"
        assert f"proposal {pid} was already applied: {why}" in run.err, run.err
        assert "nothing was written" in run.err and "1 still waiting" in run.out
        assert not (world.workspace / "notes" / "once.md").exists()
        assert world.outcome(pid) is None and count(world, "commit_outcome", pid) == 0
        assert count(world, "commit_replay_refused", pid) == attempt  # the refusal is an event
    steps = [(e["step"], e["proposal"]) for e in journal(world)]
    assert steps == [("intent", pid), ("done", pid), ("recorded", pid), ("refused", pid)]


@pytest.mark.timeout(120)
def test_an_erased_append_over_a_restored_base_is_not_applied_twice(world: World) -> None:
    """The worst case for a change: the file holds its base again, so compare-and-swap alone would apply it."""
    path = world.workspace / "notes" / "log.md"
    path.parent.mkdir()
    path.write_bytes(b"day 1\n")
    pid = world.propose("notes/log.md", b"day 1\nday 2\n", mode="append", base=b"day 1\n")
    assert run_commit(world).code == 0 and path.read_bytes() == b"day 1\nday 2\n"
    path.write_bytes(b"day 1\n")  # the person undid it in their editor
    erase_commit(world, pid)
    run = run_commit(world)
    assert run.code == 1 and "was already applied" in run.err, run.err
    assert path.read_bytes() == b"day 1\n"
    assert count(world, "commit_replay_refused", pid) == 1 and count(world, "commit_intent", pid) == 0


@pytest.mark.timeout(120)
def test_a_home_without_a_journal_starts_one_with_every_outcome_already_recorded(world: World) -> None:
    """A committer from before the journal (or a new machine): what the database says was done then is
    trusted as it is, and refused ever after."""
    pid = world.propose("notes/old.md", b"old\n")
    assert run_commit(world).code == 0
    (world.home.path / "commit-journal").unlink()
    assert run_commit(world).code == 0
    assert [(e["step"], e["proposal"], e.get("seeded")) for e in journal(world)] == [("recorded", pid, True)]
    (world.workspace / "notes" / "old.md").unlink()
    erase_commit(world, pid)
    run = run_commit(world)
    assert run.code == 1 and "this committer's journal has it applied" in run.err, run.err
    assert not (world.workspace / "notes" / "old.md").exists()


@pytest.mark.timeout(120)
def test_a_kill_between_the_journal_and_the_outcome_rows_is_finished_from_the_journal(world: World) -> None:
    """Not an attack: the journal has the outcome, the database only the intent. The next run records
    the journaled outcome without touching the disk, and exits 0."""
    pid = world.propose("notes/k.md", b"k\n")
    assert run_commit(world, GATEKEEPER_CRASH_AT="after_journal_done:1").killed
    assert world.outcome(pid) is None and (world.workspace / "notes" / "k.md").read_bytes() == b"k\n"
    (world.workspace / "notes" / "k.md").unlink()  # had the committer gone to the disk, it would be back
    run = run_commit(world)
    assert run.code == 0, run.err
    assert world.outcome(pid)[0] == "created"  # type: ignore[index]
    assert not (world.workspace / "notes" / "k.md").exists()
    assert count(world, "commit_outcome", pid) == 1 and count(world, "commit_replay_refused", pid) == 0


@pytest.mark.timeout(120)
def test_a_deleted_commit_record_alone_is_refused_with_an_event_and_exit_1(world: World) -> None:
    """A committer whose journal does not know the proposal (a new machine, or a lost home) still
    refuses, on the chain's outcome event."""
    pid = world.propose("notes/once.md", b"once\n")
    assert run_commit(world).code == 0
    (world.workspace / "notes" / "once.md").unlink()
    (world.home.path / "commit-journal").unlink()
    with unguarded(world.home.database) as conn:
        conn.execute("DELETE FROM commit_record WHERE proposal_id = ?", (pid,))
    run = run_commit(world)
    assert run.code == 1, run.err
    assert "the audit chain has its commit_outcome event, but the database has no commit_record row" in run.err
    assert not (world.workspace / "notes" / "once.md").exists() and world.outcome(pid) is None
    assert count(world, "commit_replay_refused", pid) == 1 and count(world, "commit_outcome", pid) == 1
    result = verify(world, "--approvals", "--files")
    assert result.exit_code == 1, result.output
    assert f"OUTCOME of proposal {pid}: the commit_outcome event at seq" in result.output
    assert "(created) has no commit_record row: the row was deleted" in result.output


@pytest.mark.timeout(120)
def test_verify_names_a_commit_record_whose_outcome_event_was_cut(world: World) -> None:
    pid = world.propose("notes/cut.md", b"cut\n")
    assert run_commit(world).code == 0
    assert verify(world, "--approvals", "--files").exit_code == 0
    erase_commit(world, pid, ("commit_outcome",))
    result = verify(world, "--approvals", "--files")
    assert result.exit_code == 1, result.output
    assert result.output.startswith("OK: ")  # the rehashed chain verifies on its own ...
    assert f"OUTCOME of proposal {pid}: the commit_record row (created) has no commit_outcome event" in result.output
    data = json.loads(verify(world, "--json").output)
    assert data["ok"] is False and data["outcome_problems"][0]["proposal_id"] == pid


def verify(world: World, *args: str) -> Result:
    return CliRunner().invoke(
        cli, ["--home", str(world.home.path), "audit", "verify", "--policy", str(world.policy), *args]
    )


def test_a_journal_of_mostly_history_is_compacted_to_one_line_per_proposal(tmp_path: Path) -> None:
    """Three lines per applied proposal pile up; the committer holding the exclusive lock rewrites
    them as one, atomically, and what the journal says of each proposal stays the same."""
    path = tmp_path / "commit-journal"
    j = Journal(path)
    ids = [f"p{i}" for i in range(2 * COMPACT_AFTER)]
    j.append("intent", [{"proposal": p} for p in ids])
    j.append("done", [{"proposal": p, "outcome": {"proposal_id": p, "outcome": "created"}} for p in ids])
    j.append("recorded", [{"proposal": p} for p in ids[1:]])
    j.append("refused", [{"proposal": "p9", "why": "gone from the database"}])
    with path.open("ab") as f:
        f.write(b'{"step": "done", "proposal": "torn')  # a kill during a write
    j.refresh()
    before, size = dict(j.entries), path.stat().st_size
    assert j.wasteful() and before["p0"].step == "done" and before["p9"].step == "refused"
    j.compact()
    assert path.stat().st_size < size / 2 and not j.wasteful()
    fresh = Journal(path)
    fresh.refresh()
    assert fresh.entries == before and fresh.lines == len(ids)
    assert fresh.get("p0") == Entry("done", before["p0"].at, {"proposal_id": "p0", "outcome": "created"})


@pytest.mark.timeout(120)
def test_commit_watch_says_it_once_and_goes_on_with_the_others(tmp_path: Path) -> None:
    """``commit --watch`` (what ``gatekeeper up`` runs): the held approval is one event and one log line
    however many passes see it, and later approvals are committed as usual."""
    world = make_world(tmp_path / "w")
    pid = world.propose("notes/once.md", b"once\n")
    assert run_commit(world).code == 0
    (world.workspace / "notes" / "once.md").unlink()
    erase_commit(world, pid)
    watcher = Committer(world, ["--watch"], commit_env(world), real=True)
    try:
        assert wait_for(lambda: "was already applied" in watcher.err_path.read_text(), timeout=30)
        later = world.propose("notes/later.md", b"later\n")
        assert wait_for(lambda: world.outcome(later) is not None, timeout=30)
        last = world.propose("notes/last.md", b"last\n")  # a pass after a retry of the held one
        assert wait_for(lambda: world.outcome(last) is not None, timeout=30)
    finally:
        watcher.proc.send_signal(signal.SIGINT)
        run = watcher.wait(timeout=15)
    assert run.code == 0 and run.err.count(f"proposal {pid} was already applied") == 1, run.err
    assert count(world, "commit_replay_refused", pid) == 1
    assert not (world.workspace / "notes" / "once.md").exists()
    assert (world.workspace / "notes" / "later.md").read_bytes() == b"later\n"


def test_a_journal_that_cannot_be_read_stops_the_committer_before_it_writes(tmp_path: Path) -> None:
    world = make_world(tmp_path / "w")
    pid = world.propose("notes/x.md", b"x\n")
    (world.home.path / "commit-journal").mkdir()  # not a file: reading it fails
    run = run_commit(world)
    assert run.code == 1 and "Traceback" not in run.err, run.err
    assert "cannot read the committer's journal" in run.err and "Is a directory" in run.err, run.err
    assert not (world.workspace / "notes" / "x.md").exists() and world.outcome(pid) is None

"""The committer's building blocks in isolation: the batched store methods, the queue and its
floor, the test-only switches, the kernel calls and the lock."""

from __future__ import annotations

import errno
import json
import os
import socket
from pathlib import Path

import pytest

from gatekeeper.audit.verify import verify_chain
from gatekeeper.commit import fsops
from gatekeeper.commit.faults import from_env
from gatekeeper.commit.lock import CommitLock, CommitterBusy
from gatekeeper.commit.switches import CRASH_POINTS, Switches
from gatekeeper.errors import Conflict, InvalidInput
from gatekeeper.home import Home
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.workspace import beneath, syscalls
from tests.helpers import PROOF, add_reviewer, draft


def approved(store: Store, home: Home, path: str, verdict: str = "approved") -> str:
    p = store.propose(draft(path, path.encode()))
    reason = "no" if verdict == "rejected" else None
    store.decide(
        p.id,
        verdict=verdict,
        reviewer="alice",
        sha256=p.sha256,
        path=path,
        reason=reason,
        proof=PROOF,
    )
    return p.id


def test_intents_in_one_transaction_report_what_each_proposal_needs(store: Store, home: Home) -> None:
    add_reviewer(store)
    a, b, c = (approved(store, home, f"notes/{n}.md") for n in "abc")
    rejected = approved(store, home, "notes/r.md", "rejected")
    pending = store.propose(draft("notes/p.md", b"p")).id
    store.record_commit_outcomes([{"proposal_id": c, "outcome": "created", "final_path": "/w/notes/c.md"}])
    assert store.record_commit_intents([a]) == {a: "new"}
    assert store.record_commit_intents([a, b, c, rejected, pending, "nope"]) == {
        a: "existing",
        b: "new",
        c: "done",
        rejected: "not approved",
        pending: "not approved",
        "nope": "not approved",
    }
    with Reader(home.db_path) as r:
        intents = [e for e in r.events(kind="commit_intent")]
        assert [e[4] for e in intents] == [a, b]
        assert verify_chain(r).ok


def test_intents_roll_back_together(store: Store, home: Home) -> None:
    add_reviewer(store)
    a, b = approved(store, home, "notes/a.md"), approved(store, home, "notes/b.md")

    def boom() -> None:
        raise RuntimeError("killed inside the transaction")

    with pytest.raises(RuntimeError):
        store.record_commit_intents([a, b], before_commit=boom)
    assert store.record_commit_intents([a, b]) == {a: "new", b: "new"}


def test_outcomes_in_one_transaction_skip_those_already_recorded(store: Store, home: Home) -> None:
    add_reviewer(store)
    a, b = approved(store, home, "notes/a.md"), approved(store, home, "notes/b.md")
    seen: list[str] = []
    first = store.record_commit_outcomes(
        [{"proposal_id": a, "outcome": "created", "final_path": "/w/notes/a.md", "observed_sha256": "ab"}],
        after_row=seen.append,
    )
    assert first == {a: True} and seen == [a]
    again = store.record_commit_outcomes(
        [{"proposal_id": a, "outcome": "conflict"}, {"proposal_id": b, "outcome": "refused", "detail": "why"}]
    )
    assert again == {a: False, b: True}
    with Reader(home.db_path) as r:
        assert r.proposal(a)["commit"]["outcome"] == "created"  # type: ignore[index]
        assert r.proposal(b)["status"] == "refused"  # type: ignore[index]
        outcomes = r.events(kind="commit_outcome")
        assert [json.loads(e[5]) for e in outcomes][1] == {
            "outcome": "refused",
            "observed_sha256": None,
            "final_path": None,
            "detail": "why",
        }
        assert verify_chain(r).ok
    with pytest.raises(InvalidInput):
        store.record_commit_outcomes([{"proposal_id": b, "outcome": "maybe"}])
    pending = store.propose(draft("notes/p.md", b"p")).id
    with pytest.raises(Conflict):
        store.record_commit_outcomes([{"proposal_id": pending, "outcome": "created"}])


def test_an_id_repeated_in_one_batch_gets_one_intent_and_one_outcome(store: Store, home: Home) -> None:
    """Found by tests/test_stateful.py: a third repeat of an id in one batch wrote a second intent
    event, and a third repeat in an outcome batch hit the UNIQUE index (the whole batch failed)."""
    add_reviewer(store)
    a = approved(store, home, "notes/a.md")
    assert store.record_commit_intents([a, a, a]) == {a: "existing"}
    recorded = store.record_commit_outcomes([{"proposal_id": a, "outcome": "created"}] * 3)
    assert recorded == {a: False}  # the last repeat's answer; the first wrote the one row
    with Reader(home.db_path) as r:
        assert len(r.events(kind="commit_intent")) == 1
        assert len(r.events(kind="commit_outcome")) == 1
        assert r.proposal(a)["status"] == "committed"  # type: ignore[index]
        assert verify_chain(r).ok


def test_queue_is_oldest_first_and_the_floor_skips_finished_history(store: Store, home: Home) -> None:
    add_reviewer(store)
    ids = [approved(store, home, f"notes/{i}.md") for i in range(4)]
    approved(store, home, "notes/r.md", "rejected")
    store.record_commit_outcomes([{"proposal_id": ids[1], "outcome": "created"}])
    store.record_commit_intents([ids[2]])
    with Reader(home.db_path) as r:
        high, rows = r.commit_queue()
        assert high == 5 and [row["id"] for row in rows] == [ids[0], ids[2], ids[3]]
        assert [bool(row["has_intent"]) for row in rows] == [False, True, False]
        assert r.proposal_contents([ids[0]]) == {ids[0]: b"notes/0.md"}
        assert [row["id"] for row in r.commit_queue(after_decision_id=2)[1]] == [ids[2], ids[3]]
        before = r.data_version()
        store.record_commit_outcomes([{"proposal_id": ids[0], "outcome": "created"}])
        assert r.data_version() != before


def test_switches_parse_and_refuse_typos() -> None:
    sw = from_env(
        {"GATEKEEPER_CRASH_AT": "after_link:2,after_select:1", "GATEKEEPER_PLANT_BUG": "in_place", "OTHER": "x"}
    )
    assert sw.crash == {"after_link": 2, "after_select": 1} and sw.bug == "in_place"
    assert sw.active == ("GATEKEEPER_CRASH_AT=after_link:2,after_select:1", "GATEKEEPER_PLANT_BUG=in_place")
    assert not from_env({}).active
    for env in (
        {"GATEKEEPER_CRASH_AT": "after_lnk:1"},
        {"GATEKEEPER_CRASH_AT": "after_link:0"},
        {"GATEKEEPER_PLANT_BUG": "other"},
        {"GATEKEEPER_PAUSE_AT": "after_link:1"},
        {"GATEKEEPER_INJECT": "fsync"},
    ):
        with pytest.raises(InvalidInput):
            from_env(env)
    assert len(set(CRASH_POINTS)) == len(CRASH_POINTS)


def test_openat2_refuses_escapes_and_symlinks(tmp_path: Path) -> None:
    if not syscalls.openat2_works():
        pytest.skip("openat2 is not available on this kernel")
    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "d")
    root = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.close(syscalls.openat2(root, "d", os.O_RDONLY | os.O_DIRECTORY))
        for rel, code in (("link", errno.ELOOP), ("../", errno.EXDEV), ("/etc", errno.EXDEV)):
            with pytest.raises(OSError) as info:
                syscalls.openat2(root, rel, os.O_RDONLY | os.O_DIRECTORY)
            assert info.value.errno == code, rel
        with pytest.raises(OSError) as bad:
            syscalls.openat2(root, "d", os.O_RDONLY, resolve=0x40)  # an unknown bit: how detection works
        assert bad.value.errno == errno.EINVAL
    finally:
        os.close(root)


@pytest.mark.parametrize("no_openat2", [False, True])
def test_open_dir_creates_beneath_and_names_what_is_in_the_way(tmp_path: Path, no_openat2: bool) -> None:
    sw = Switches(no_openat2=no_openat2)
    (tmp_path / "file").write_text("x")
    (tmp_path / "sym").symlink_to(tmp_path)
    root = beneath.open_root(tmp_path)
    try:
        os.close(fsops.open_dir(root, ["a", "b", "c"], sw, create=True))
        assert (tmp_path / "a" / "b" / "c").is_dir()
        with pytest.raises(beneath.InTheWay, match="'file' is a file, not a folder"):
            fsops.open_dir(root, ["file", "x"], sw, create=True)
        with pytest.raises(beneath.InTheWay, match="'a/sym2' is a symbolic link"):
            (tmp_path / "a" / "sym2").symlink_to(tmp_path / "nowhere")
            fsops.open_dir(root, ["a", "sym2"], sw, create=True)
        with pytest.raises(FileNotFoundError):
            fsops.open_dir(root, ["missing"], sw, create=False)
    finally:
        os.close(root)
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("no_tmpfile", [False, True])
def test_publish_is_exclusive_and_exact(tmp_path: Path, no_tmpfile: bool) -> None:
    sw = Switches(no_tmpfile=no_tmpfile)
    d = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.umask(0o077)
        first = fsops.publish(d, "a.md", b"exact\n", 0o640, sw)
        assert first.linked and (tmp_path / "a.md").read_bytes() == b"exact\n"
        assert (tmp_path / "a.md").stat().st_mode & 0o777 == 0o640  # the rule's mode, not the umask's
        assert not fsops.publish(d, "a.md", b"other\n", 0o640, sw).linked
        (tmp_path / "dangling").symlink_to(tmp_path / "target")
        assert not fsops.publish(d, "dangling", b"x", 0o644, sw).linked
        assert not (tmp_path / "target").exists()
    finally:
        os.umask(0o022)
        os.close(d)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md", "dangling"]  # no temporary names left


def test_lock_names_its_holder_and_frees_on_release(home: Home) -> None:
    with CommitLock(home.lock_path):
        info = json.loads(home.lock_path.read_text())
        assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
        with pytest.raises(CommitterBusy) as busy:
            CommitLock(home.lock_path).acquire()
        assert f"pid {os.getpid()} on host {socket.gethostname()}" in str(busy.value)
        assert busy.value.exit_code == 3
    with CommitLock(home.lock_path):
        pass
    assert home.lock_path.exists() and home.lock_path.stat().st_mode & 0o777 == 0o600


def test_policy_is_read_again_when_it_changes_and_never_used_stale(tmp_path: Path) -> None:
    from gatekeeper.commit.committer import PolicySource
    from gatekeeper.errors import PolicyError
    from tests.commit_support import make_world

    w = make_world(tmp_path / "w")
    source = PolicySource(str(w.policy), w.home.path)
    first = source.current()
    assert source.current() is first  # unchanged file: no re-read
    w.write_policy(globs=["notes/**"])
    second = source.current()
    assert second is not first and second.rule("notes", "create_note").propose.globs == ("notes/**",)  # type: ignore[union-attr]
    w.policy.write_text("version: 2\n")
    with pytest.raises(PolicyError):
        source.current()
    with pytest.raises(PolicyError):  # still broken: the previous policy is not used instead
        source.current()


def test_batches_are_bounded_by_count_and_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gatekeeper.commit import committer as cm
    from gatekeeper.commit.checks import Candidate

    def cand(i: int, size: int) -> Candidate:
        return Candidate(str(i), "", "s", "t", "/w", f"{i}", "", size, i, "approved", "a", None, "", "", "", "", False)

    c = cm.Committer.__new__(cm.Committer)
    c.batch = 3
    monkeypatch.setattr(cm, "BATCH_BYTES", 100)
    sizes = [10, 10, 10, 10, 90, 5, 200, 1]
    batches = [[x.size for x in b] for b in c._batches([cand(i, s) for i, s in enumerate(sizes)])]
    assert batches == [[10, 10, 10], [10, 90], [5], [200], [1]]


def test_planted_bugs_replace_named_steps_only_through_the_seam() -> None:
    """Fault injection stays behind ``Switches`` (switches.py); the production modules read without it."""
    from gatekeeper.commit import committer, planted

    assert Switches().step("publish", fsops.publish) is fsops.publish
    in_place = from_env({"GATEKEEPER_PLANT_BUG": "in_place"})
    assert in_place.step("publish", fsops.publish) is planted.in_place
    assert in_place.step("record_outcomes", committer.record_outcomes) is committer.record_outcomes
    separate = from_env({"GATEKEEPER_PLANT_BUG": "separate_event"})
    assert separate.step("record_outcomes", committer.record_outcomes) is planted.separate_event
    assert separate.step("publish", fsops.publish) is fsops.publish
    for module in (committer, fsops):
        code = Path(str(module.__file__)).read_text().split('"""', 2)[2]  # after the module docstring
        assert ".bug" not in code and "planted" not in code.lower(), module.__name__

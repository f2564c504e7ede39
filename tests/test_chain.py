"""The hash chain detects every edit, insertion and removal (a removed tail with --expect-head)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gatekeeper.audit.verify import SavedHead, parse_head, verify_chain
from gatekeeper.canonical import canonical_bytes, canonical_json
from gatekeeper.home import Home
from gatekeeper.review.integrity import ChainWatch, Integrity
from gatekeeper.store.chain import GENESIS, event_hash, event_message, verify_rows
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.store.target import Database, PostgresUrl
from tests.helpers import PROOF, add_reviewer, draft, make_home
from tests.pg_support import BACKENDS, Copies, connect

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=10,
)


@given(
    seq=st.integers(min_value=1, max_value=2**53),
    at=st.text(),
    kind=st.text(),
    actor=st.text(),
    proposal_id=st.none() | st.text(),
    payload=st.dictionaries(st.text(), json_values, max_size=5),
)
def test_event_message_is_the_canonical_json_of_the_event(seq, at, kind, actor, proposal_id, payload) -> None:
    event = {
        "seq": seq,
        "at": at,
        "kind": kind,
        "actor": actor,
        "proposal_id": proposal_id,
        "payload": payload,
    }
    assert event_message(seq, at, kind, actor, proposal_id, canonical_json(payload)) == canonical_bytes(event)


def _populate(home: Home, db: Database, n: int = 6) -> None:
    with Store(db, keys_dir=home.keys.folder) as store:
        add_reviewer(store)
        for i in range(n):
            p = store.propose(draft(f"notes/{i}.md", f"note {i} \u00e9\n".encode()))
            if i % 2:
                store.decide(
                    p.id,
                    verdict="approved",
                    reviewer="alice",
                    sha256=p.sha256,
                    path=f"notes/{i}.md",
                    proof=PROOF,
                )


@pytest.fixture(scope="module", params=BACKENDS)
def pristine(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Copies]:
    """Ten events with audit_event's append-only triggers dropped: an attacker holding the database."""
    home = make_home(tmp_path_factory.mktemp("chain") / "home")
    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    db: Database = server.new_database() if server is not None else home.db_path
    _populate(home, db)
    conn = connect(db)
    if server is None:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for action in ("update", "delete", "truncate") if server is not None else ("update", "delete"):
        conn.execute(f"DROP TRIGGER audit_event_no_{action}" + (" ON audit_event" if server is not None else ""))
    conn.commit()
    conn.close()
    copies = Copies(db, server)
    yield copies
    copies.close()
    if isinstance(db, PostgresUrl) and server is not None:
        server.drop(db)


def _copy(pristine: Copies, dest: Path) -> Database:
    return pristine.copy(dest)


def _verify(db: Database, expect_head: str | None = None):
    with Reader(db) as reader:
        return verify_chain(reader, expect_head)


def test_pristine_chain_verifies(pristine: Copies, tmp_path: Path) -> None:
    report = _verify(_copy(pristine, tmp_path))
    assert report.ok and report.count == report.head_seq == 10  # reviewer + 6 proposals + 3 decisions


COLUMNS = ["at", "kind", "actor", "proposal_id", "payload", "prev_hash", "hash"]


@pytest.mark.parametrize("column", [*COLUMNS, "seq"])
@pytest.mark.parametrize("seq", [1, 5, 10])
def test_changing_any_column_of_any_event_fails_at_that_seq(
    pristine: Copies, tmp_path: Path, column: str, seq: int
) -> None:
    db = _copy(pristine, tmp_path)
    conn = connect(db)
    if column == "seq":
        conn.execute("UPDATE audit_event SET seq = seq + 1000 WHERE seq = ?", (seq,))
    elif column == "payload":
        payload = json.loads(conn.execute("SELECT payload FROM audit_event WHERE seq = ?", (seq,)).fetchone()[0])
        payload["tampered"] = True
        conn.execute(
            "UPDATE audit_event SET payload = ? WHERE seq = ?",
            (json.dumps(payload, sort_keys=True, separators=(",", ":")), seq),
        )
    elif column == "proposal_id":
        conn.execute(
            "UPDATE audit_event SET proposal_id = CASE WHEN proposal_id IS NULL THEN 'X' "
            "ELSE 'Z' || substr(proposal_id, 2) END WHERE seq = ?",  # ids start 0-7; the column holds 26
            (seq,),
        )
    else:
        conn.execute(f"UPDATE audit_event SET {column} = {column} || 'x' WHERE seq = ?", (seq,))
    conn.commit()
    report = _verify(db)
    assert not report.ok
    assert report.problem is not None and report.problem.seq == seq


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_single_character_change_is_named(
    pristine: Copies, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    db = _copy(pristine, tmp_path_factory.mktemp("byte"))
    conn = connect(db)
    seq = data.draw(st.integers(1, 10), label="seq")
    column = data.draw(st.sampled_from(["at", "kind", "actor", "payload", "prev_hash", "hash"]), label="column")
    value = conn.execute(f"SELECT {column} FROM audit_event WHERE seq = ?", (seq,)).fetchone()[0]
    i = data.draw(st.integers(0, len(value) - 1), label="index")
    ch = data.draw(st.characters(codec="ascii").filter(lambda c: c not in (value[i], "\x00")), label="char")
    conn.execute(f"UPDATE audit_event SET {column} = ? WHERE seq = ?", (value[:i] + ch + value[i + 1 :], seq))
    conn.commit()
    conn.close()
    report = _verify(db)
    assert report.problem is not None and report.problem.seq == seq


def test_removed_middle_event_is_named(pristine: Copies, tmp_path: Path) -> None:
    db = _copy(pristine, tmp_path)
    conn = connect(db)
    conn.execute("DELETE FROM audit_event WHERE seq = 4")
    conn.commit()
    report = _verify(db)
    assert report.problem is not None and report.problem.seq == 4 and "missing" in report.problem.reason


def test_inserted_event_is_named(pristine: Copies, tmp_path: Path) -> None:
    db = _copy(pristine, tmp_path)
    conn = connect(db)
    conn.execute("UPDATE audit_event SET seq = -seq WHERE seq >= 4")  # make room for one...
    conn.execute("UPDATE audit_event SET seq = 1 - seq WHERE seq < 0")  # ...by shifting the rest up
    conn.execute(
        "INSERT INTO audit_event SELECT 4, at, kind, actor, proposal_id, payload, prev_hash, hash "
        "FROM audit_event WHERE seq = 3"
    )
    conn.commit()
    report = _verify(db)
    assert report.problem is not None and report.problem.seq == 4


def _head(db: Database) -> str:
    """The line `audit head` prints: 'SEQ HASH'."""
    with Reader(db) as r:
        seq, digest = r.head()
    return f"{seq} {digest}"


def _rewrite_from(db: Database, seq: int) -> None:
    """An attacker with the file: change the event at ``seq`` and recompute every hash after it."""
    conn = connect(db)
    payload = json.loads(conn.execute("SELECT payload FROM audit_event WHERE seq = ?", (seq,)).fetchone()[0])
    payload["rewritten"] = True
    conn.execute("UPDATE audit_event SET payload = ? WHERE seq = ?", (canonical_json(payload), seq))
    prev = conn.execute("SELECT hash FROM audit_event WHERE seq = ?", (seq - 1,)).fetchone()
    prev_hash = prev[0] if prev else GENESIS
    rows = conn.execute(
        "SELECT seq, at, kind, actor, proposal_id, payload FROM audit_event WHERE seq >= ? ORDER BY seq", (seq,)
    ).fetchall()
    for s, at, kind, actor, pid, body in rows:
        digest = event_hash(prev_hash, s, at, kind, actor, pid, body)
        conn.execute("UPDATE audit_event SET prev_hash = ?, hash = ? WHERE seq = ?", (prev_hash, digest, s))
        prev_hash = digest
    conn.commit()
    conn.close()


def _grow(db: Database, n: int = 3) -> None:
    with Store(db) as store:
        for i in range(n):
            store.propose(draft(f"notes/grown-{i}.md", b"more\n"))


def test_removed_tail_needs_the_head_kept_elsewhere(pristine: Copies, tmp_path: Path) -> None:
    db = _copy(pristine, tmp_path)
    head = _head(db)
    conn = connect(db)
    conn.execute("DELETE FROM audit_event WHERE seq >= 9")
    conn.commit()
    assert _verify(db).ok  # the chain alone cannot see a cut tail...
    report = _verify(db, expect_head=head)  # ...the head kept elsewhere does
    assert not report.ok and report.problem is not None and report.problem.seq == 9
    assert report.problem.reason == (
        "the log ends at seq 8 but the saved head is at seq 10: events were removed from the end"
    )
    assert _verify(_copy(pristine, tmp_path / "b"), expect_head=head).ok


def test_a_grown_log_still_holds_the_saved_head(pristine: Copies, tmp_path: Path) -> None:
    db = _copy(pristine, tmp_path)
    head = _head(db)
    _grow(db)
    report = _verify(db, expect_head=head)
    assert report.ok, report.problem
    assert report.head_seq == 13  # the log grew past the saved head, and that is fine
    bare = head.split()[1]  # a bare hash saved by an older Gatekeeper: found wherever it is
    assert _verify(db, expect_head=bare).ok


def test_a_grown_log_cut_before_the_saved_head_fails(pristine: Copies, tmp_path: Path) -> None:
    db = _copy(pristine, tmp_path)
    head = _head(db)
    conn = connect(db)
    conn.execute("DELETE FROM audit_event WHERE seq >= 7")
    conn.commit()
    conn.close()
    report = _verify(db, expect_head=head)
    assert report.problem is not None and report.problem.saved_head
    assert "the log ends at seq 6 but the saved head is at seq 10" in report.problem.reason


@pytest.mark.parametrize("grow", [False, True])
def test_a_rewritten_log_fails_even_when_its_chain_verifies(pristine: Copies, tmp_path: Path, grow: bool) -> None:
    db = _copy(pristine, tmp_path)
    head = _head(db)
    saved = head.split()[1]
    _rewrite_from(db, 5)
    if grow:
        _grow(db)
    assert _verify(db).ok  # recomputed hashes: the chain alone is consistent again
    report = _verify(db, expect_head=head)
    assert report.problem is not None and report.problem.seq == 10 and report.problem.saved_head
    conn = connect(db)
    now_at_10 = conn.execute("SELECT hash FROM audit_event WHERE seq = 10").fetchone()[0]
    conn.close()
    assert report.problem.reason.startswith(
        f"the event at seq 10 has hash {now_at_10}, the saved head says {saved}: the log was rewritten"
    )
    bare = _verify(db, expect_head=saved)
    assert bare.problem is not None and "is at no seq of the log" in bare.problem.reason


def test_a_head_broken_in_the_chain_itself_names_the_first_bad_row(pristine: Copies, tmp_path: Path) -> None:
    db = _copy(pristine, tmp_path)
    head = _head(db)
    conn = connect(db)
    conn.execute("UPDATE audit_event SET actor = 'mallory' WHERE seq = 4")
    conn.commit()
    conn.close()
    report = _verify(db, expect_head=head)
    assert report.problem is not None and report.problem.seq == 4 and not report.problem.saved_head


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10 " + "A" * 64, SavedHead(10, "a" * 64)),
        (" 0 " + GENESIS + "\n", SavedHead(0, GENESIS)),
        ('{"seq": 3, "hash": "' + "b" * 64 + '"}', SavedHead(3, "b" * 64)),
        ("c" * 64, SavedHead(None, "c" * 64)),
    ],
)
def test_parse_head_reads_what_audit_head_prints(text: str, expected: SavedHead) -> None:
    assert parse_head(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "cannot read the saved head"),
        ("1 2 3", "cannot read the saved head"),
        ("ten " + "a" * 64, "is not a whole number"),
        ("-1 " + "a" * 64, "is not a whole number"),
        ("10 xyz", "is not 64 hex digits"),
        ('{"seq": true, "hash": "' + "a" * 64 + '"}', "is not a whole number"),
        ('{"seq": 1}', "exactly 'seq' and 'hash'"),
        ("{oops", "not valid JSON"),
    ],
)
def test_parse_head_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_head(text)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_chain_head_is_genesis(home: Home) -> None:
    with Reader(home.database) as r:
        assert r.head() == (0, GENESIS)
        assert verify_chain(r).ok


def test_verify_rows_from_a_verified_head_checks_only_the_tail(pristine: Copies, tmp_path: Path) -> None:
    db = _copy(pristine, tmp_path)
    with Reader(db) as reader:
        seq6 = reader.events(after_seq=5, limit=1)[0]
        tail = reader.events(after_seq=6)
    report = verify_rows(tail, 6, seq6[7])
    assert report.ok and report.count == 4 and report.head_seq == 10
    broken = verify_rows(tail, 6, GENESIS)  # the tail does not continue from this head
    assert broken.problem is not None and broken.problem.seq == 7 and broken.count == 0
    gap = verify_rows(tail[1:], 6, seq6[7])
    assert gap.problem is not None and gap.problem.seq == 7 and "missing" in gap.problem.reason


def test_the_review_footer_checks_new_events_incrementally_and_names_a_bad_one(
    pristine: Copies, tmp_path: Path
) -> None:
    db = _copy(pristine, tmp_path)
    watch = ChainWatch(db)
    assert watch.full() == Integrity("ok", 10)
    _grow(db, 2)
    assert watch.current() == Integrity("ok", 12)
    _grow(db, 1)
    conn = connect(db)
    conn.execute("UPDATE audit_event SET actor = 'mallory' WHERE seq = 13")
    conn.commit()
    conn.close()
    result = watch.current()
    assert result.state == "failed" and result.detail == "seq 13: hash does not match the row's contents"

"""Committers running at once with the lock bypassed: the design alone must keep each file and
each outcome to exactly one (exclusive link, intent re-checked inside BEGIN IMMEDIATE, the
outcome row skipped when another committer recorded it first)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from gatekeeper.audit.verify import verify_chain
from gatekeeper.store.queries import Reader
from tests.commit_support import Committer, World, commit_env, make_world, snapshot, wait_for

APPROVALS = 500


def approvals(w: World, n: int) -> dict[str, tuple[str, bytes]]:
    made = {}
    with w.store() as s:
        for i in range(n):
            path, content = f"bulk/d{i % 10}/f{i}.md", f"file {i}\n".encode() * (1 + i % 50)
            made[w.propose(path, content, store=s)] = (path, content)
    return made


@pytest.mark.slow
@pytest.mark.parametrize(
    ("committers", "batch", "real"),
    [(2, 8, True), (3, 1, False)],
    ids=["2 CLI processes, batch 8", "3 forked processes, batch 1"],
)
def test_committers_at_once_create_each_file_and_outcome_once(
    tmp_path: Path, committers: int, batch: int, real: bool
) -> None:
    w = make_world(tmp_path / "w")
    made = approvals(w, APPROVALS)
    # Each one pauses right after reading the queue, so all of them hold the same 500 approvals
    # before any of them writes anything; then they are released together.
    prefixes = [str(tmp_path / f"c{k}") for k in range(committers)]
    procs = [
        Committer(
            w,
            ["--once", "--json", "--batch", str(batch)],
            commit_env(w, GATEKEEPER_COMMIT_NO_LOCK="1", GATEKEEPER_PAUSE_AT=f"after_select:1:{prefix}"),
            real=real,
        )
        for prefix in prefixes
    ]
    assert wait_for(lambda: all(os.path.exists(p + ".paused") for p in prefixes), timeout=60)
    for p in prefixes:
        Path(p + ".resume").touch()
    runs = [c.wait(timeout=120) for c in procs]
    assert [r.code for r in runs] == [0] * committers, [r.err for r in runs]

    lines = [[json.loads(x) for x in r.out.splitlines() if x.strip()] for r in runs]
    results = [[x for x in ls if "proposal_id" in x] for ls in lines]
    linked = Counter(x["path"] for rs in results for x in rs if x["linked"])
    recorded = Counter(x["proposal_id"] for rs in results for x in rs if x["recorded"])
    assert set(linked.values()) == {1} and len(linked) == APPROVALS, "a file was created twice, or never"
    assert set(recorded.values()) == {1} and set(recorded) == set(made), "an outcome was recorded twice, or never"
    per_process = [sum(x["recorded"] for x in rs) for rs in results]
    lost_races = sum(not x["recorded"] for rs in results for x in rs)
    print(f"\noutcomes recorded per committer: {per_process}; outcomes found already recorded: {lost_races}")
    assert sum(1 for n in per_process if n > 0) >= 2, "the committers did not actually overlap"

    rows = w.db_rows("SELECT proposal_id, outcome FROM commit_record")
    assert len(rows) == APPROVALS and {o for _, o in rows} == {"created"}
    kinds = Counter(w.db_rows("SELECT proposal_id, kind FROM audit_event WHERE kind LIKE 'commit_%'"))
    for pid in made:
        assert kinds[(pid, "commit_intent")] == 1 and kinds[(pid, "commit_outcome")] == 1, pid
    on_disk = snapshot(w.workspace)
    files = {p: e for p, e in on_disk.items() if e[0] == "file"}
    assert files == {path: ("file", content, 0o644) for path, content in made.values()}
    for path in files:
        assert os.stat(w.workspace / path).st_nlink == 1
    assert snapshot(w.outside) == {}
    with Reader(w.home.db_path) as reader:
        assert verify_chain(reader).ok

"""The crash campaign on PostgreSQL: committers killed (-9) at named steps, then finished by a clean
run, with every invariant of issue 5 checked after each kill and at the end (``commit_support.check``).

On PostgreSQL a committer also holds claims (``store/claims.py``) from before its intents until its
outcomes: a kill must release them with the connection, so the clean run can finish what was
interrupted (a claim left behind would leave approvals waiting, and the final check fails). Kept
small for ``make test``; the SQLite campaign (``test_commit_crash.py``) is the long one.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from gatekeeper.store.target import PostgresUrl
from tests.commit_support import build_scenario, check, run_commit

# Where a kill matters most: around the intent transaction, the file step, and the outcome transaction.
POINTS = [
    ("intent_tx_open", "after_link"),
    ("after_intent", "outcome_row_written"),
    ("after_link", "after_outcome"),
    ("after_exchange", "intent_tx_open"),
    ("before_outcome", "after_intent"),
    ("outcome_row_written", "before_outcome"),
    ("after_journal_done", "after_journal_intent"),  # the committer's own journal (commit/journal.py)
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("first", "second"), POINTS, ids=[f"{a}+{b}" for a, b in POINTS])
def test_kills_on_postgres_keep_every_invariant(
    tmp_path: Path, postgres_database: PostgresUrl, first: str, second: str
) -> None:
    rng = random.Random(f"{first}/{second}")
    sc = build_scenario(tmp_path / "w", rng, fresh=5, late=2, database=postgres_database)
    batch = str(rng.choice([1, 3, 64]))
    kills = 0
    for point in (first, second):
        run = run_commit(sc.world, "--once", "--batch", batch, GATEKEEPER_CRASH_AT=f"{point}:1")
        kills += run.killed
        assert run.killed or run.code in (0, 1), run.err
        assert check(sc, final=False) == [], f"after a kill at {point}"
        sc.approve_late()  # approvals keep arriving between crashes
    assert kills >= 1, "no kill happened: the campaign tested nothing"
    while sc.approve_late():
        pass
    run = run_commit(sc.world, "--once")
    assert run.code == 0, run.err
    assert check(sc, final=True) == []


def test_the_postgres_checks_catch_a_planted_bug(tmp_path: Path, postgres_database: PostgresUrl) -> None:
    """The same checks, reading PostgreSQL, see an outcome row committed without its event."""
    sc = build_scenario(tmp_path / "w", random.Random(7), fresh=2, late=0, database=postgres_database)
    run = run_commit(
        sc.world, "--once", GATEKEEPER_PLANT_BUG="separate_event", GATEKEEPER_CRASH_AT="outcome_row_written:1"
    )
    assert run.killed
    assert any("outcome row(s) but 0 outcome event(s)" in p for p in check(sc, final=False))

"""A one-shot committer caught mid-batch when PostgreSQL stops (issue 24, item 16): its intent
write is retried inside the store (``Transactions.retrying``, up to 120 s), and it must say
so: once that the database is gone, once that it answers again (the lines ``up`` says for its
feed, from the same ``store.backends.Outage``), then finish the batch, each approval once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gatekeeper.store.target import PostgresUrl
from tests.commit_support import Committer, commit_env, make_world
from tests.helpers import wait_until
from tests.pg_support import Cluster, own_cluster
from tests.test_commit_machines import audit_ok, files_in, once_per_proposal, propose_for, results


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with own_cluster() as own:
        yield own


def text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


@pytest.mark.timeout(240)
def test_a_one_shot_committer_says_once_that_the_database_went_and_once_that_it_is_back(
    tmp_path: Path, cluster: Cluster
) -> None:
    w = make_world(tmp_path / "w", PostgresUrl(cluster.url("gk")))
    made = propose_for(w, "notes", w.workspace, 6, tag="a")
    prefix = str(tmp_path / "batch")
    env = commit_env(w, GATEKEEPER_PAUSE_AT=f"intent_tx_open:1:{prefix}")
    committer = Committer(w, ["--json", "--batch", "8"], env, real=True)
    try:
        wait_until(lambda: Path(prefix + ".paused").exists(), 60, "the intent transaction, open")
        cluster.kill()  # its COMMIT is lost; every retry fails until the server is back
        Path(prefix + ".resume").touch()
        wait_until(lambda: "lost the database" in text(committer.err_path), 60, "the committer to say so")
        cluster.start()
    finally:
        run = committer.wait(timeout=150)
    assert run.code == 0, run.err
    said = [line for line in run.err.splitlines() if "database" in line]
    assert len(said) == 2, run.err  # once each, however many retries lay between
    assert said[0].startswith("commit: lost the database: ") and "retrying for up to 120 s" in said[0], said
    assert said[1] == "commit: the database answers again", said
    assert "Traceback" not in run.err
    assert sorted(x["proposal_id"] for x in results(run)) == sorted(made)
    once_per_proposal(w, made)
    assert files_in(w.workspace) == dict(made.values())
    audit_ok(w)

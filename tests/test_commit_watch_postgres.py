"""``commit --watch`` on PostgreSQL while the server is killed (-9) and restarted: the committer
says once that a pass failed, reconnects, carries on, and every approval is committed exactly once.

Two kills: one while the committer is inside a batch (paused after its intents, claims held), so
its outcomes are written over a new connection; one while it is idle, so its next look at the
database fails and it retries until the server is back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gatekeeper.store.backends import DatabaseUnreachable
from gatekeeper.store.queries import Reader
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
    """What a forked committer wrote so far (nothing before it redirected its output)."""
    return path.read_text() if path.exists() else ""


@pytest.mark.timeout(240)
def test_watch_survives_a_killed_and_restarted_server(tmp_path: Path, cluster: Cluster) -> None:
    w = make_world(tmp_path / "w", PostgresUrl(cluster.url("gk")))
    prefix = str(tmp_path / "batch")
    watcher = Committer(
        w,
        ["--watch", "--json", "--batch", "8"],
        commit_env(w, GATEKEEPER_PAUSE_AT=f"after_intent:1:{prefix}"),
        real=True,
    )
    err = watcher.err_path
    made = {}
    try:
        wait_until(lambda: "Watching" in text(err), 60, "the committer to start")
        made |= propose_for(w, "notes", w.workspace, 20, tag="a")
        wait_until(lambda: Path(prefix + ".paused").exists(), 60, "the first batch (intents written, claims held)")
        cluster.kill()  # inside the batch: its claims and connections are gone
        cluster.start()
        Path(prefix + ".resume").touch()
        wait_until(lambda: len(w.db_rows("SELECT 1 FROM commit_record")) == 20, 60, "the first 20 outcomes")

        cluster.kill()  # idle: its next look at the database fails
        wait_until(lambda: "pass failed" in text(err), 30, "the committer to notice")
        cluster.start()
        made |= propose_for(w, "notes", w.workspace, 20, tag="b")
        wait_until(lambda: len(w.db_rows("SELECT 1 FROM commit_record")) == 40, 60, "all 40 outcomes")
    finally:
        watcher.terminate()
        run = watcher.wait(timeout=30)
    assert run.code == 0, run.err
    assert run.err.count("pass failed") == 1, run.err  # said once, not every retry
    assert "lost the connection" in run.err or "cannot connect" in run.err
    assert "the pass worked again; carrying on" in run.err and "Traceback" not in run.err
    acted = results(run)
    assert sorted(x["proposal_id"] for x in acted) == sorted(made)  # each acted on once
    assert all(x["recorded"] and x["linked"] for x in acted)
    once_per_proposal(w, made)
    assert files_in(w.workspace) == dict(made.values())
    audit_ok(w)
    log = (cluster.base / "log").read_text()
    assert log.count("database system was interrupted") + log.count("not properly shut down") >= 2


def test_a_reader_reconnects_after_the_server_was_down_for_several_reads(cluster: Cluster) -> None:
    """The watcher's reader: each read while the server is down fails clearly; the first after it is
    back works (a connection that broke holds no snapshot, so it is reopened, not reported forever)."""
    with Reader(PostgresUrl(cluster.url("gk"))) as reader:
        seen = reader.data_version()
        cluster.kill()
        for _ in range(3):
            with pytest.raises(DatabaseUnreachable):
                reader.data_version()
        cluster.start()
        assert reader.data_version() == seen

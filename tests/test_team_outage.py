"""PostgreSQL killed or stopped under a running proxy: a proposal in flight is retried after the
restart and recorded once; while the server stays down the host gets a clear tool error (what went
wrong, what to do), never a traceback, and nothing half-written.

The cluster is this test's own (the session's stays up for the others). To catch a proposal
mid-transaction, a test session holds the chain's advisory lock, so the proxy's propose is seen
waiting on it in ``pg_locks`` before the server is killed: a lost connection at propose time, not
a race with the kill.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import pytest

from gatekeeper.audit.verify import verify_chain
from gatekeeper.home import Home
from gatekeeper.store.postgres import CHAIN_LOCK
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.store.target import ENV_DATABASE_URL
from tests.helpers import await_until, draft, make_home, wait_until
from tests.pg_support import Cluster, own_cluster
from tests.process_support import Lines
from tests.proxy_support import write_policy
from tests.review_support import PASSWORD, Page, free_port, hashed, review_process, start_up
from tests.test_team_runtime import proxied_on


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with own_cluster(migrated=False) as own:  # make_home migrates it
        yield own


@pytest.fixture
def team_home(tmp_path: Path, cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.setenv(ENV_DATABASE_URL, cluster.url("gk"))
    return make_home(tmp_path / "home")  # migrates the cluster's database


def waiting_on_the_chain_lock(cluster: Cluster) -> bool:
    with psycopg.connect(cluster.conninfo("gk"), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()
    return row is not None and row[0] == 1


def text_of(result: Any) -> str:
    return " ".join(c.text for c in result.content)


def note(title: str) -> dict[str, str]:
    return {"title": title, "body": f"{title}\n"}


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.timeout(300)
async def test_a_proposal_survives_a_killed_server_and_a_server_that_stays_down_is_a_clear_error(
    tmp_path: Path, cluster: Cluster, team_home: Home
) -> None:
    from gatekeeper.proxy.proposing import PROPOSE_RETRY_SECONDS  # here: the module runs against older code too

    policy = write_policy(tmp_path)
    async with proxied_on(policy, team_home) as proxy:
        assert not (await proxy.call_tool("create_note", note("before"))).is_error

        holder = psycopg.connect(cluster.conninfo("gk"), autocommit=True)
        holder.execute("BEGIN")
        holder.execute(f"SELECT pg_advisory_xact_lock({CHAIN_LOCK})")
        results: dict[str, Any] = {}

        async def propose_during() -> None:
            results["during"] = await proxy.call_tool("create_note", note("during"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(propose_during)
            await await_until(lambda: waiting_on_the_chain_lock(cluster), 30, "the proxy's propose to wait on the lock")
            await anyio.to_thread.run_sync(cluster.kill)  # the proxy's connection breaks mid-transaction
            await anyio.to_thread.run_sync(cluster.start)
        holder.close()
        during = results["during"]
        assert not during.is_error, text_of(during)  # reconnected and recorded after the restart
        pid = during.structured_content["proposal_id"]
        again = await proxy.call_tool("create_note", note("during"))  # the agent retries: the same one
        assert (again.structured_content["proposal_id"], again.structured_content["repeat"]) == (pid, True)

        await anyio.to_thread.run_sync(cluster.stop)  # down, and staying down
        status = await proxy.call_tool("gatekeeper_proposal_status", {"proposal_id": pid})
        assert status.is_error and "database is unreachable" in text_of(status), text_of(status)
        started = time.monotonic()
        refused = await proxy.call_tool("create_note", note("after"))
        waited = time.monotonic() - started
        said = text_of(refused)
        assert refused.is_error and said.startswith("Proposal not confirmed: Gatekeeper's database is unreachable")
        assert "Call the tool again" in said and "check the database server" in said and "Traceback" not in said
        assert PROPOSE_RETRY_SECONDS <= waited < PROPOSE_RETRY_SECONDS + 20  # it kept trying, then said so

        await anyio.to_thread.run_sync(cluster.start)
        after = await proxy.call_tool("create_note", note("after"))
        assert not after.is_error and after.structured_content["repeat"] is False, text_of(after)

    with psycopg.connect(cluster.conninfo("gk"), autocommit=True) as conn:
        paths = conn.execute("SELECT path, count(*) FROM proposal GROUP BY path ORDER BY path").fetchall()
        created = conn.execute(
            "SELECT count(*), count(DISTINCT proposal_id) FROM audit_event WHERE kind = 'proposal_created'"
        ).fetchone()
    assert paths == [("notes/after.md", 1), ("notes/before.md", 1), ("notes/during.md", 1)]  # none lost, none twice
    assert created == (3, 3)
    with Reader(team_home.database) as reader:
        report = verify_chain(reader)
    assert report.ok, report.problem
    assert "Traceback" not in (team_home.path / "proxy-stderr.log").read_text()


@pytest.mark.slow
def test_the_review_page_says_plainly_while_postgres_is_down_and_recovers(cluster: Cluster, team_home: Home) -> None:
    with Store(team_home.database, keys_dir=team_home.keys.folder) as store:
        store.add_reviewer("alice", hashed())
        p = store.propose(draft("notes/a.md", b"A\n"))
    with review_process(team_home) as (base, _proc):
        page = Page(base)
        assert page.login().status_code == 303
        assert p.id in page.client.get("/").text
        cluster.stop()
        down = page.client.get("/")
        assert down.status_code == 503, down.text[:500]
        assert "cannot reach its database" in down.text and "Reload in a minute" in down.text
        api = page.client.get("/api/proposals")
        assert api.status_code == 503 and "cannot reach its database" in api.json()["error"]
        cluster.start()
        # The same session, nothing lost but time. The store's pooled writer connection is found dead on
        # its first use after the restart (one more 503), then replaced: reloading is what the page says.
        back = wait_until(lambda: (r := page.client.get("/")).status_code == 200 and r, 20, "the page to answer")
        assert p.id in back.text
    assert "Traceback" not in (team_home.path / "review.log").read_text()


@pytest.mark.slow
def test_up_says_once_when_postgres_goes_away_and_carries_on(tmp_path: Path, cluster: Cluster, team_home: Home) -> None:
    policy = write_policy(tmp_path)
    proc = start_up(team_home.path, free_port(), policy, PASSWORD)
    lines = Lines(proc)
    try:
        lines.wait_for("Committing into")
        cluster.stop()
        lines.wait_for("lost the database: ")
        cluster.start()
        lines.wait_for("the database answers again")
        with Store(team_home.database, keys_dir=team_home.keys.folder) as store:
            p = store.propose(draft("notes/after.md", b"after\n"))
        lines.wait_for(f"proposal  {p.id}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    said = [line.split(":")[0] for line in lines.seen if line.startswith(("lost the database", "the database answers"))]
    assert said[:2] == ["lost the database", "the database answers again"], "\n".join(lines.seen)
    assert said == said[:2] * (len(said) // 2), said  # each outage said once, with its end (a stop may flap)

"""Committers per machine (issue 15): ``commit --server NAME`` takes only those servers' approvals,
a lock per server lets committers of disjoint servers share a home, and on PostgreSQL each
committer claims an approval (``FOR UPDATE SKIP LOCKED``) before acting, so two committers never
both act on one proposal and never wait for each other."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.audit.checkpoints import verify_checkpoints
from gatekeeper.audit.verify import verify_chain, verify_files
from gatekeeper.store.queries import Reader
from gatekeeper.store.target import PostgresUrl
from tests.commit_support import Committer, Run, World, commit_env, make_world, run_commit, snapshot, wait_for
from tests.helpers import draft

TWO_SERVERS = """version: 1
servers:
  alpha:
    command: python
    workspace: {alpha}
    tools:
      create_note:
        propose: {{path: {{arg: path}}, content: {{arg: body}}, globs: ["**"], file_mode: "0644"}}
  beta:
    command: python
    workspace: {beta}
    tools:
      create_note:
        propose: {{path: {{arg: path}}, content: {{arg: body}}, globs: ["**"], file_mode: "0644"}}
"""


def propose_for(w: World, server: str, workspace: Path, n: int, tag: str = "") -> dict[str, tuple[str, bytes]]:
    """``n`` approved proposals for ``server``'s ``workspace``, decided by alice on ``w``'s store."""
    made = {}
    with w.store() as s:
        for i in range(n):
            path, content = f"{server}/{tag}d{i % 5}/f{i}.md", f"{server} {tag} {i}\n".encode() * (1 + i % 7)
            d = dataclasses.replace(
                draft(path, content, server=server, arguments={"path": path, "n": i, "tag": tag}),
                workspace=str(workspace),
                workspace_real=os.path.realpath(workspace),
            )
            pid = s.propose(d).id
            w.decide(pid, store=s)
            made[pid] = (path, content)
    return made


def results(run: Run) -> list[dict[str, Any]]:
    return [x for x in (json.loads(line) for line in run.out.splitlines() if line.strip()) if "proposal_id" in x]


def audit_ok(w: World) -> None:
    """What ``gatekeeper audit verify --files`` checks: the chain, its checkpoints, committed files."""
    with Reader(w.home.database) as reader:
        chain = verify_chain(reader)
        assert chain.ok, chain.problem
        assert verify_checkpoints(reader, w.home.keys.keyring()).ok
        _, problems = verify_files(reader)
        assert problems == []


def once_per_proposal(w: World, made: dict[str, tuple[str, bytes]]) -> None:
    """Exactly one outcome row, one outcome event and one intent per proposal; nothing else committed."""
    rows = w.db_rows("SELECT proposal_id, outcome FROM commit_record")
    assert sorted(pid for pid, _ in rows) == sorted(made) and {o for _, o in rows} == {"created"}
    kinds = Counter(w.db_rows("SELECT proposal_id, kind FROM audit_event WHERE kind LIKE 'commit_%'"))
    assert set(kinds.values()) == {1} and len(kinds) == 2 * len(made), "an intent or outcome event twice"


def files_in(workspace: Path) -> dict[str, bytes]:
    return {p: e[1] for p, e in snapshot(workspace).items() if e[0] == "file"}


@pytest.mark.timeout(180)
def test_two_machines_on_one_postgres_each_commit_their_own_server(
    tmp_path: Path, postgres_database: PostgresUrl
) -> None:
    a = make_world(tmp_path / "a", postgres_database)
    b = make_world(tmp_path / "b", postgres_database, keys_from=a.home)  # public keys only: it cannot approve
    assert not b.home.keys.has_private()
    for w in (a, b):  # each machine's policy names both servers and both workspaces
        w.policy.write_text(TWO_SERVERS.format(alpha=a.workspace, beta=b.workspace))
    made: dict[str, dict[str, tuple[str, bytes]]] = {"alpha": {}, "beta": {}}
    for round_ in range(3):  # a mixed batch: the two servers' approvals interleaved
        for server, ws in (("alpha", a.workspace), ("beta", b.workspace)):
            made[server] |= propose_for(a, server, ws, 12, tag=f"r{round_}")
    machines = [
        Committer(a, ["--once", "--json", "--batch", "5", "--server", "alpha"], commit_env(a)),
        Committer(b, ["--once", "--json", "--batch", "5", "--server", "beta"], commit_env(b)),
    ]
    runs = [m.wait(timeout=120) for m in machines]
    assert [r.code for r in runs] == [0, 0], [r.err for r in runs]
    for run, server in zip(runs, ("alpha", "beta"), strict=True):
        assert {x["proposal_id"] for x in results(run)} == set(made[server])
        assert all(x["recorded"] and x["linked"] for x in results(run))
    assert files_in(a.workspace) == dict(made["alpha"].values())  # none of beta's files
    assert files_in(b.workspace) == dict(made["beta"].values())  # none of alpha's files
    once_per_proposal(a, made["alpha"] | made["beta"])
    audit_ok(a)
    audit_ok(b)
    again = run_commit(a, "--once", "--server", "alpha")
    assert (again.code, again.out) == (0, "Nothing to commit: no approved proposal is waiting.\n")


def test_committers_of_disjoint_servers_share_a_home_and_overlapping_ones_do_not(tmp_path: Path) -> None:
    w = make_world(tmp_path / "w")
    other = tmp_path / "w" / "workspace-beta"
    other.mkdir()
    w.policy.write_text(TWO_SERVERS.format(alpha=w.workspace, beta=other))
    alpha = Committer(w, ["--watch", "--server", "alpha"], commit_env(w), real=True)
    try:
        assert wait_for(lambda: "Watching" in alpha.err_path.read_text(), timeout=30), "the committer did not start"
        made = propose_for(w, "beta", other, 3)
        beta = run_commit(w, "--once", "--server", "beta")  # beside the alpha committer, on the same home
        assert beta.code == 0, beta.err
        assert files_in(other) == dict(made.values())
        holder = f"pid {alpha.pid} on host {socket.gethostname()}"
        both = run_commit(w, "--once", "--server", "beta", "--server", "alpha")
        assert both.code == 3
        assert f"another committer is running for server 'alpha': {holder}" in both.err
        assert "commit-alpha.lock" in both.err
        every = run_commit(w, "--once")
        assert every.code == 3
        assert f"another committer is running for server 'alpha': {holder}" in every.err
        assert "Traceback" not in both.err + every.err
    finally:
        alpha.terminate()
        assert alpha.wait(timeout=15).code == 0
    every = Committer(w, ["--watch"], commit_env(w), real=True)
    try:
        assert wait_for(lambda: "Watching" in every.err_path.read_text(), timeout=30), "the committer did not start"
        one = run_commit(w, "--once", "--server", "beta")
        assert one.code == 3
        assert f"another committer is running for every server: pid {every.pid}" in one.err
    finally:
        every.terminate()
        assert every.wait(timeout=15).code == 0


def test_an_unknown_server_is_a_clear_error_naming_the_policys_servers(tmp_path: Path) -> None:
    w = make_world(tmp_path / "w")
    run = run_commit(w, "--once", "--server", "notes", "--server", "nope")
    assert run.code == 2
    assert "--server 'nope': not a server of the policy" in run.err
    assert "its servers are: notes" in run.err and "Traceback" not in run.err


APPROVALS = 200


@pytest.mark.timeout(240)
def test_two_committers_for_one_server_never_both_act_on_a_proposal(
    tmp_path: Path, postgres_database: PostgresUrl
) -> None:
    """The lock bypassed, both read the same 200 approvals, then race: each claims a batch before
    acting on it, so every proposal is acted on by exactly one of them (no reconciling, no lost
    race), each file is created once and each outcome recorded once."""
    w = make_world(tmp_path / "w", postgres_database)
    made = propose_for(w, "notes", w.workspace, APPROVALS)
    prefixes = [str(tmp_path / f"c{k}") for k in range(2)]
    procs = [
        Committer(
            w,
            ["--once", "--json", "--batch", "4"],
            commit_env(w, GATEKEEPER_COMMIT_NO_LOCK="1", GATEKEEPER_PAUSE_AT=f"after_select:1:{prefix}"),
        )
        for prefix in prefixes
    ]
    assert wait_for(lambda: all(os.path.exists(p + ".paused") for p in prefixes), timeout=60)
    for p in prefixes:
        Path(p + ".resume").touch()
    runs = [c.wait(timeout=180) for c in procs]
    assert [r.code for r in runs] == [0, 0], [r.err for r in runs]
    acted = [results(r) for r in runs]
    per_proposal = Counter(x["proposal_id"] for rs in acted for x in rs)
    assert set(per_proposal) == set(made)
    assert set(per_proposal.values()) == {1}, "two committers both acted on one proposal"
    assert all(x["linked"] and x["recorded"] and x["outcome"] == "created" for rs in acted for x in rs)
    print(f"\nproposals per committer: {[len(rs) for rs in acted]}")
    assert all(rs for rs in acted), "the committers did not actually overlap"
    once_per_proposal(w, made)
    assert files_in(w.workspace) == dict(made.values())
    audit_ok(w)


@pytest.mark.timeout(180)
def test_a_committer_skips_what_another_has_claimed_instead_of_waiting(
    tmp_path: Path, postgres_database: PostgresUrl
) -> None:
    """One committer stops inside its first batch (intents written, claims held); a second one
    commits everything else and exits at once, leaving that batch to the first."""
    w = make_world(tmp_path / "w", postgres_database)
    made = propose_for(w, "notes", w.workspace, 40)
    prefix = str(tmp_path / "first")
    first = Committer(
        w,
        ["--once", "--json", "--batch", "8"],
        commit_env(w, GATEKEEPER_COMMIT_NO_LOCK="1", GATEKEEPER_PAUSE_AT=f"after_intent:1:{prefix}"),
    )
    try:
        assert wait_for(lambda: os.path.exists(prefix + ".paused"), timeout=60)
        second = run_commit(w, "--once", "--json", timeout=20, GATEKEEPER_COMMIT_NO_LOCK="1")
        assert second.code == 0, second.err
        assert len(results(second)) == 32  # never waited for the first one's 8
        assert json.loads(second.out.splitlines()[-1])["summary"]["waiting"] == 0
    finally:
        Path(prefix + ".resume").touch()
    run = first.wait(timeout=60)
    assert run.code == 0, run.err
    assert len(results(run)) == 8 and all(x["linked"] for x in results(run))
    once_per_proposal(w, made)
    assert files_in(w.workspace) == dict(made.values())

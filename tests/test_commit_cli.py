"""``gatekeeper commit`` as people and scripts see it: output, exit codes, the lock, ``--watch``,
and the outcome reaching the host through the proxy's ``gatekeeper_proposal_status``."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gatekeeper.home import Home
from gatekeeper.store.store import Store
from tests.commit_support import PY, REPO, Committer, World, commit_env, make_world, run_commit, wait_for
from tests.helpers import PROOF, TEST_HASH, budget
from tests.proxy_support import proxied, write_policy


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path / "w")


def mixed(w: World) -> dict[str, str]:
    (w.workspace / "notes").mkdir()
    (w.workspace / "notes" / "taken.md").write_bytes(b"already here\n")
    return {
        "created": w.propose("notes/new.md", b"new\n"),
        "conflict": w.propose("notes/taken.md", b"mine\n"),
        "refused": w.propose("elsewhere/x.md", b"x\n"),
        "pending": w.propose("notes/pending.md", b"p\n", verdict=None),
    }


def test_once_prints_each_outcome_and_a_summary(world: World) -> None:
    ids = mixed(world)
    run = run_commit(world, "--once")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert re.fullmatch(
        rf"created\s+{ids['created']}  notes/new\.md  → {re.escape(str(world.workspace))}/notes/new\.md", lines[1]
    ), lines
    assert lines[0].startswith(f"refused   {ids['refused']}  elsewhere/x.md  the path 'elsewhere/x.md' no longer")
    assert lines[2].startswith(f"conflict  {ids['conflict']}  notes/taken.md  a different file is already at")
    assert lines[-1] == "Done: 1 created, 0 applied, 0 deleted, 1 conflict, 1 refused, 0 failed."
    assert run.err == ""
    again = run_commit(world, "--once")
    assert (again.code, again.out) == (0, "Nothing to commit: no approved proposal is waiting.\n")
    assert not (world.workspace / "notes" / "pending.md").exists()


def test_once_json_is_one_object_per_outcome_then_a_summary(world: World) -> None:
    ids = mixed(world)
    run = run_commit(world, "--once", "--json")
    assert run.code == 0, run.err
    objects = [json.loads(line) for line in run.out.splitlines()]
    by_id = {o["proposal_id"]: o for o in objects[:-1]}
    assert by_id[ids["created"]] | {"detail": ""} == {
        "proposal_id": ids["created"],
        "path": "notes/new.md",
        "outcome": "created",
        "detail": "",
        "final_path": str(world.workspace / "notes" / "new.md"),
        "observed_sha256": __import__("hashlib").sha256(b"new\n").hexdigest(),
        "linked": True,
        "recorded": True,
    }
    assert by_id[ids["conflict"]]["outcome"] == "conflict" and by_id[ids["refused"]]["outcome"] == "refused"
    zero = {"applied": 0, "deleted": 0, "failed": 0, "waiting": 0}
    assert objects[-1] == {"summary": {"created": 1, "conflict": 1, "refused": 1, **zero}}


def test_bad_invocations_say_what_to_do(world: World, tmp_path: Path) -> None:
    both = run_commit(world, "--once", "--watch")
    assert both.code == 2 and "pass --once or --watch, not both" in both.err
    world.policy.write_text("version: 1\nservers:\n  notes:\n    workspace: ./ws\n")
    bad = run_commit(world, "--once")
    assert (
        bad.code == 2
        and "policy.yaml:3: servers.notes: missing 'command' (a program to start) or 'url'" in bad.err
        and "Traceback" not in bad.err
    )
    world.write_policy()
    switch = run_commit(world, "--once", GATEKEEPER_CRASH_AT="no_such_point:1")
    assert switch.code == 2 and "unknown point 'no_such_point'" in switch.err
    env = commit_env(world)
    env["GATEKEEPER_HOME"] = str(tmp_path / "nowhere")
    missing = subprocess.run(
        [PY, "-m", "gatekeeper", "commit", "--once", "--policy", str(world.policy)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1
    assert missing.stderr.startswith(f"Error: no Gatekeeper home at {tmp_path / 'nowhere'}")
    assert "gatekeeper init" in missing.stderr and "Traceback" not in missing.stderr


def test_test_only_switches_announce_themselves(world: World) -> None:
    run = run_commit(world, "--once", GATEKEEPER_COMMIT_NO_LOCK="1")
    assert run.code == 0 and "test-only switches are set (GATEKEEPER_COMMIT_NO_LOCK=1)" in run.err


def start_watch(w: World) -> Committer:
    c = Committer(w, ["--watch"], commit_env(w), real=True)
    assert wait_for(lambda: "Watching" in c.err_path.read_text(), timeout=30), "the committer did not start"
    return c


@pytest.mark.slow
def test_watch_commits_each_approval_promptly_and_stops_on_signals(world: World) -> None:
    watcher = start_watch(world)
    try:
        seconds = []
        for i in range(5):
            pid = world.propose(f"notes/w{i}.md", f"watch {i}\n".encode(), verdict=None)
            target = world.workspace / "notes" / f"w{i}.md"
            world.decide(pid)
            start = time.monotonic()
            assert wait_for(target.exists, timeout=10, interval=0.005), f"no file {i} after 10 s"
            seconds.append(time.monotonic() - start)
            assert target.read_bytes() == f"watch {i}\n".encode()
            assert wait_for(lambda p=pid: world.outcome(p) is not None, timeout=10)
        print(f"\nwatch: approval to file in {', '.join(f'{s * 1000:.0f} ms' for s in seconds)}")
        assert max(seconds) < budget(2.0)  # a functional check, not a performance one (see bench/)
        busy = run_commit(world, "--once")  # a second committer while --watch holds the lock
        assert busy.code == 3
        assert f"another committer is running: pid {watcher.pid} on host {socket.gethostname()}" in busy.err
    finally:
        watcher.proc.send_signal(signal.SIGINT)
        run = watcher.wait(timeout=15)
    assert run.code == 0 and run.err.rstrip().endswith("Stopped."), run.err
    assert run.out.count("created ") == 5
    again = start_watch(world)
    again.terminate()  # SIGTERM
    assert again.wait(timeout=15).code == 0


def test_lock_is_released_by_a_killed_committer(world: World) -> None:
    pid = world.propose("notes/x.md", b"x\n")
    killed = run_commit(world, "--once", GATEKEEPER_CRASH_AT="after_intent:1")
    assert killed.killed
    holder = json.loads(world.home.lock_path.read_text())
    assert holder["pid"] and holder["host"] == socket.gethostname()
    run = run_commit(world, "--once")
    assert run.code == 0 and world.outcome(pid)[0] == "created"  # type: ignore[index]


def test_the_committer_imports_neither_the_sdk_nor_fastapi() -> None:
    code = (
        "import sys, gatekeeper.commit.run, gatekeeper.commit.watch, gatekeeper.cli.commit_cmd;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'fastapi', 'starlette', 'uvicorn'}))"
    )
    done = subprocess.run([PY, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_the_commit_package_does_not_import_the_cli() -> None:
    """The CLI calls the committer, never the other way round: ``python -m gatekeeper commit`` is the
    one way to run it, and ``gatekeeper.commit`` stays importable without click or the CLI."""
    import ast

    offenders = []
    for path in sorted((REPO / "gatekeeper" / "commit").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            offenders += [f"{path.name}: {n}" for n in names if n == "click" or n.startswith("gatekeeper.cli")]
    assert offenders == []


# -- the outcome reaches the host --------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.slow
async def test_outcome_reaches_the_host_through_proposal_status(tmp_path: Path, home: Home) -> None:
    policy = write_policy(tmp_path)
    workspace = tmp_path / "workspace"
    world = World(tmp_path, home, workspace, tmp_path / "outside", policy)
    async with proxied(policy, home.path, client_info=None) as p:
        made = {}
        for title in ("Kept", "Clash"):
            result = await p.call_tool("create_note", {"title": title, "body": f"{title} body\n"})
            assert not result.is_error, result.content
            made[title] = result.structured_content
        with Store(home.db_path) as s:
            s.add_reviewer("alice", TEST_HASH)
            for summary in made.values():
                s.decide(
                    summary["proposal_id"],
                    verdict="approved",
                    reviewer="alice",
                    sha256=summary["sha256"],
                    path=summary["destination"],
                    proof=PROOF,
                )
        (workspace / "notes" / "clash.md").write_text("someone was faster\n")
        run = run_commit(world, "--once")
        assert run.code == 0, run.err
        kept = await p.call_tool("gatekeeper_proposal_status", {"proposal_id": made["Kept"]["proposal_id"]})
        clash = await p.call_tool("gatekeeper_proposal_status", {"proposal_id": made["Clash"]["proposal_id"]})
    final = str(workspace / "notes" / "kept.md")
    assert kept.structured_content["status"] == "committed"
    assert kept.structured_content["final_path"] == final and kept.structured_content["outcome"] == "created"
    assert f"committed: the file exists at {final}" in kept.content[0].text  # type: ignore[union-attr]
    assert clash.structured_content["status"] == "conflict"
    assert "a different file is already at 'notes/clash.md'" in clash.content[0].text  # type: ignore[union-attr]
    assert (workspace / "notes" / "kept.md").read_text() == "Kept body\n"


def test_python_dash_m_help_lists_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gatekeeper", "commit", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0 and "--watch" in done.stdout and "Exit status" in done.stdout


def test_a_missing_workspace_makes_approvals_wait_not_fail(world: World) -> None:
    pid = world.propose("notes/x.md", b"x\n")
    world.workspace.rename(world.root / "unmounted")
    run = run_commit(world, "--once")
    assert run.code == 1 and world.outcome(pid) is None
    assert f"waiting: the workspace {world.workspace} cannot be opened" in run.err
    assert "Done: 0 created, 0 applied, 0 deleted, 0 conflict, 0 refused, 0 failed; 1 still waiting." in run.out
    (world.root / "unmounted").rename(world.workspace)
    assert run_commit(world, "--once").code == 0
    assert world.outcome(pid)[0] == "created"  # type: ignore[index]


def test_folders_the_committer_makes_are_0755_despite_its_private_umask(world: World) -> None:
    """The CLI runs under umask 077 (for the home); that must not leak into the workspace."""
    pid = world.propose("notes/deep/er/new.md", b"new\n")
    run = run_commit(world, "--once")
    assert run.code == 0, run.err
    assert pid in run.out
    for folder in ("notes", "notes/deep", "notes/deep/er"):
        assert (world.workspace / folder).stat().st_mode & 0o777 == 0o755, folder

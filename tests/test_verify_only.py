"""``gatekeeper init --public-keys FILE``: a home for a committer's or auditor's machine that holds
only the review side's public keys. It commits what the review side approved and verifies the
log and its checkpoints, but it cannot approve, and the review page refuses to start there."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gatekeeper.cli import cli
from gatekeeper.errors import GatekeeperError
from gatekeeper.home import Home
from gatekeeper.review.app import Config, create_app
from gatekeeper.store.store import Store
from tests.commit_support import World, make_world, run_commit
from tests.helpers import PROOF
from tests.review_support import IN_PROCESS_PORT, free_port


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path / "w")


def gk(home: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), *args], input=input)


def exported(world: World, tmp_path: Path) -> Path:
    out = gk(world.home.path, "keys", "export-public")
    assert out.exit_code == 0, out.output
    path = tmp_path / "review-side.pub.json"
    path.write_text(out.output)
    return path


def share_database(world: World, far: Home) -> None:
    """The shared database as the committer's machine reaches it (a copy here; PostgreSQL in a team)."""
    src, dst = sqlite3.connect(world.home.db_path), sqlite3.connect(far.db_path)
    src.backup(dst)
    src.close()
    dst.close()


def test_a_verify_only_home_commits_and_verifies_but_cannot_approve(world: World, tmp_path: Path) -> None:
    pid = world.propose("notes/far.md", b"far\n")
    waiting = world.propose("notes/wait.md", b"wait\n", verdict=None)
    assert gk(world.home.path, "audit", "checkpoint").exit_code == 0
    far = Home(tmp_path / "committer")
    made = gk(far.path, "init", "--public-keys", str(exported(world, tmp_path)))
    assert made.exit_code == 0, made.output
    assert "no private key: this machine commits and verifies, it never approves" in made.output
    assert far.keys.public_ids() == world.home.keys.public_ids() and not far.keys.has_private()
    assert not any(p.name == "decision-ed25519" for p in far.keys.folder.iterdir())
    again = gk(far.path, "init")  # running init again keeps it verify-only
    assert again.exit_code == 0 and not far.keys.has_private(), again.output
    share_database(world, far)
    run = run_commit(dataclasses.replace(world, home=far))
    assert run.code == 0, run.err
    assert (world.workspace / "notes" / "far.md").read_bytes() == b"far\n"
    ((outcome,),) = (
        sqlite3.connect(far.db_path)
        .execute("SELECT outcome FROM commit_record WHERE proposal_id = ?", (pid,))
        .fetchall()
    )
    assert outcome == "created"
    verified = gk(far.path, "audit", "verify")
    assert verified.exit_code == 0 and "OK: 1 signed checkpoint(s)" in verified.output, verified.output
    ((sha,),) = world.db_rows("SELECT sha256 FROM proposal WHERE id = ?", waiting)
    with Store(far.db_path) as store, pytest.raises(GatekeeperError, match="holds public keys only"):
        store.decide(waiting, verdict="approved", reviewer="alice", sha256=sha, path="notes/wait.md", proof=PROOF)
    with pytest.raises(GatekeeperError, match=r"holds public keys only .* the review page does not start here"):
        create_app(Config(far, IN_PROCESS_PORT))


def test_the_review_command_refuses_to_start_on_a_verify_only_home(world: World, tmp_path: Path) -> None:
    far = tmp_path / "committer"
    assert gk(far, "init", "--public-keys", str(exported(world, tmp_path))).exit_code == 0
    env = {**os.environ, "GATEKEEPER_HOME": str(far)}
    run = subprocess.run(
        [sys.executable, "-m", "gatekeeper", "review", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,  # a page that started would serve until killed: the test fails on the timeout
    )
    assert run.returncode == 1 and run.stdout == "", (run.returncode, run.stdout)
    assert "holds public keys only" in run.stderr and "on the machine that holds the private key" in run.stderr
    assert "Traceback" not in run.stderr


def test_init_public_keys_refuses_a_review_side_home_and_a_bad_file(world: World, tmp_path: Path) -> None:
    refused = gk(world.home.path, "init", "--public-keys", str(exported(world, tmp_path)))
    assert refused.exit_code != 0 and "already holds a private signing key" in refused.output, refused.output
    assert world.home.keys.has_private()
    bad = tmp_path / "not-keys.txt"
    bad.write_text("hello\n")
    nowhere = tmp_path / "never-made"
    result = gk(nowhere, "init", "--public-keys", str(bad))
    assert result.exit_code != 0 and "not what `gatekeeper keys export-public` prints" in result.output
    assert not nowhere.exists()

"""Deleting every signed checkpoint (triggers dropped) and recomputing the chain's hashes, as a
database writer without the key can: the chain verifies on its own and no checkpoint is left to
fail, so ``audit verify`` has to notice what is missing. The home that verified before remembers
its newest checkpoint; ``--max-unsigned AGE`` needs every event older than AGE covered."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from click.testing import CliRunner, Result

from gatekeeper.cli import cli
from gatekeeper.home import Home
from gatekeeper.store.chain import GENESIS, event_hash
from gatekeeper.store.store import Store
from tests.helpers import add_reviewer, draft


def gk(home: Home, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home.path), *args])


def history(home: Home) -> None:
    with Store(home.db_path) as store:
        add_reviewer(store)
        store.propose(draft())


def rewrite_without_checkpoints(db: Path) -> int:
    """Delete every chain_checkpoint event and renumber and rehash the rest; return how many went."""
    conn = sqlite3.connect(db)
    try:
        with conn:
            for name in ("audit_event_no_update", "audit_event_no_delete"):
                conn.execute(f"DROP TRIGGER IF EXISTS {name}")
            rows = conn.execute("SELECT seq, at, kind, actor, proposal_id, payload FROM audit_event ORDER BY seq")
            kept = [r for r in rows.fetchall() if r[2] != "chain_checkpoint"]
            gone = conn.execute("SELECT count(*) FROM audit_event").fetchone()[0] - len(kept)
            conn.execute("DELETE FROM audit_event")
            prev = GENESIS
            for seq, (_, at, kind, actor, pid, payload) in enumerate(kept, start=1):
                digest = event_hash(prev, seq, at, kind, actor, pid, payload)
                conn.execute(
                    "INSERT INTO audit_event (seq, at, kind, actor, proposal_id, payload, prev_hash, hash) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (seq, at, kind, actor, pid, payload, prev, digest),
                )
                prev = digest
    finally:
        conn.close()
    return int(gone)


def test_every_checkpoint_deleted_is_caught_by_the_home_that_verified_before(home: Home) -> None:
    history(home)
    assert gk(home, "audit", "checkpoint").exit_code == 0
    with Store(home.db_path) as store:
        store.propose(draft(content=b"later\n"))
    first = gk(home, "audit", "verify")
    assert first.exit_code == 0 and "OK: 1 signed checkpoint(s)" in first.output, first.output
    seen = json.loads((home.path / "checkpoint-seen").read_text())
    assert (home.path / "checkpoint-seen").stat().st_mode & 0o077 == 0
    assert rewrite_without_checkpoints(home.db_path) == 1
    result = gk(home, "audit", "verify")
    assert result.exit_code == 1, result.output
    assert result.output.startswith("OK: ")  # the recomputed chain itself verifies ...
    assert "CHECKPOINTS MISSING" in result.output and f"checkpoint at seq {seq_of(seen)}" in result.output
    assert "is gone" in result.output and "checkpoint-seen" in result.output  # ... what to do if on purpose
    report = json.loads(gk(home, "audit", "verify", "--json").output)
    assert report["ok"] is False and len(report["checkpoint_gaps"]) == 1


def seq_of(seen: dict[str, object]) -> int:
    return int(str(seen["seq"]))


def test_every_checkpoint_deleted_is_caught_by_max_unsigned_on_a_machine_that_never_verified(home: Home) -> None:
    history(home)
    assert gk(home, "audit", "checkpoint").exit_code == 0
    ok = gk(home, "audit", "verify", "--max-unsigned", "0s")
    assert ok.exit_code == 0, ok.output  # everything but the checkpoint itself is covered
    (home.path / "checkpoint-seen").unlink()  # a machine that never verified this log
    rewrite_without_checkpoints(home.db_path)
    assert gk(home, "audit", "verify").exit_code == 0  # nothing to remember, nothing to fail
    result = gk(home, "audit", "verify", "--max-unsigned", "0s")
    assert result.exit_code == 1, result.output
    assert "event(s) older than 0s, from seq 1 on, are covered by no signed checkpoint" in result.output
    assert "no valid signed checkpoint" in result.output
    assert gk(home, "audit", "verify", "--max-unsigned", "1h").exit_code == 0  # all of it is minutes old


def test_max_unsigned_names_the_events_after_the_newest_checkpoint(home: Home) -> None:
    history(home)
    signed = gk(home, "audit", "checkpoint")
    assert signed.exit_code == 0, signed.output
    with Store(home.db_path) as store:
        later = store.propose(draft(content=b"after the checkpoint\n"))
    (checkpoint_seq,) = [int(line.split("seq ")[1].split(":")[0]) for line in signed.output.splitlines()]
    result = gk(home, "audit", "verify", "--max-unsigned", "0s")
    assert result.exit_code == 1 and f"the newest covers seq {checkpoint_seq - 1}" in result.output, result.output
    assert f"from seq {checkpoint_seq + 1} on" in result.output and later.id  # the proposal after it
    bad = gk(home, "audit", "verify", "--max-unsigned", "soon")
    assert bad.exit_code == 2 and "neither a duration" in bad.output


def test_a_home_where_the_checkpoint_cannot_be_kept_still_verifies_with_a_warning(home: Home) -> None:
    history(home)
    assert gk(home, "audit", "checkpoint").exit_code == 0
    (home.path / f".checkpoint-seen.{os.getpid()}").mkdir()  # where the file is written first
    result = CliRunner().invoke(cli, ["--home", str(home.path), "audit", "verify"])
    assert result.exit_code == 0, result.output
    assert "WARNING: could not keep the newest checkpoint" in result.stderr
    assert "Traceback" not in result.output and not (home.path / "checkpoint-seen").exists()

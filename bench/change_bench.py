"""Edit proposals per second, the diff included: what the proxy does for one ``edit_file`` call.

E1. One writer, for a fixed time: each call is checked against a real edit rule and its base read
    beneath the workspace (proxy/intake.py ``draft``: workspace/reading.py + changes.py), its unified
    diff computed (what a dry run answers and the review page shows), and the proposal recorded
    with base and result (``Store.propose``, FULL sync). The file is 4 KiB of text, ~100 lines; each
    call edits a different line, so no proposal is a repeat. Median of the runs.

    .venv/bin/python bench/change_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import FULL, QUICK, Figure, Settings, count_rows, log, make_home  # noqa: E402

from gatekeeper.content.diff import unified  # noqa: E402
from gatekeeper.policy import load_policy  # noqa: E402
from gatekeeper.proxy.intake import Requester, draft  # noqa: E402
from gatekeeper.store.store import Store  # noqa: E402

TARGET = 200  # /s: an agent's edit must cost far less than the person reading it
LINES = 100
POLICY = """version: 1
servers:
  files:
    command: python
    workspace: {workspace}
    tools:
      edit_file:
        propose:
          mode: edit
          path: {{arg: path}}
"""


def _file() -> bytes:
    """~4 KiB of text: line i is ``line i: ...`` padded, so every line is unique."""
    return "".join(f"line {i:03d}: {'x' * 30}\n" for i in range(LINES)).encode()


def _without_store(server: Any, rule: Any, who: Requester, digest: str, seconds: float) -> float:
    """The same calls without the store: what reading the base, the edit and the diff cost, per second."""
    count, start = 0, time.perf_counter()
    while time.perf_counter() < start + seconds:
        old = f"line {count % LINES:03d}: "
        args = {"path": "notes/big.md", "edits": [{"oldText": old, "newText": f"{old}dry {count} "}]}
        d = draft("files", server, "edit_file", rule, args, who, digest)
        unified(d.base or b"", d.content, d.path)
        count += 1
    return count / (time.perf_counter() - start)


def run(quick: bool, work: Path) -> list[Figure]:
    """Figure E1 (see the module docstring)."""
    s: Settings = QUICK if quick else FULL
    root = work / "edits"
    workspace = root / "ws"
    (workspace / "notes").mkdir(parents=True, exist_ok=True)
    base = _file()
    (workspace / "notes/big.md").write_bytes(base)
    policy_file = root / "policy.yaml"
    policy_file.write_text(POLICY.format(workspace=workspace))
    policy = load_policy(policy_file)
    server = policy.servers["files"]
    rule = server.tools["edit_file"].propose
    assert rule is not None
    home = make_home(root / "home")
    who = Requester("bench", "1", "2025-11-25", "bench")
    log(f"[E1] edit proposals with diff: {s.write_runs} runs of {s.write_seconds:g} s")
    rates: list[float] = []
    calls = 0
    with Store(home.db_path) as store:
        for run_no in range(s.write_runs):
            count, start = 0, time.perf_counter()
            deadline = start + s.write_seconds
            while time.perf_counter() < deadline:
                line = calls % LINES
                old = f"line {line:03d}: "
                args = {"path": "notes/big.md", "edits": [{"oldText": old, "newText": f"{old}r{run_no} c{calls} "}]}
                d = draft("files", server, "edit_file", rule, args, who, policy.digest)
                assert d.base == base and d.mode == "edit"
                diff = unified(d.base, d.content, d.path)
                assert f"+{old}r{run_no} c{calls} " in diff
                store.propose(d, "bench")
                count += 1
                calls += 1
            rates.append(count / (time.perf_counter() - start))
    cpu_rate = _without_store(server, rule, who, policy.digest, s.write_seconds)
    recorded = count_rows(home.db_path, "proposal")
    assert recorded == calls, f"{recorded} rows for {calls} calls"
    assert (workspace / "notes/big.md").read_bytes() == base  # proposing never writes
    return [
        Figure(
            "E1. edit proposals/s incl. diff (4 KiB file)",
            statistics.median(rates),
            "/s",
            TARGET,
            note="runs: " + ", ".join(f"{r:,.0f}" for r in rates) + f"; {calls} proposals recorded",
        ),
        Figure(
            "E1. reference: base read + edit + diff, no store",
            cpu_rate,
            "/s",
            note="the proxy's own work per edit call; the rest of E1 is the store's durable write (FULL sync)",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gatekeeper-bench-") as tmp:
        for figure in run(args.quick, Path(tmp)):
            print(f"{figure.name}: {figure.shown} {figure.unit} ({figure.note})")


if __name__ == "__main__":
    main()

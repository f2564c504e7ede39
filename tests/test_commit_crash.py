"""The crash campaign: committers killed at every named step and at random moments, then restarted.

After every kill and after a final clean run, ``check`` asserts every invariant of issue 5: no
partial file under any final name, no pre-existing file changed, nothing outside the workspace,
at most one outcome per approval (exactly one after the clean run) with exactly one outcome
event and one intent, created files byte-exact, unapproved proposals untouched, chain valid.
The same campaign, run with each planted bug, must find a violation.

``GATEKEEPER_CRASH_KILLS`` sets the size (300 here; ``make crash`` runs 2,000 and measures how
often each planted bug is caught over ``GATEKEEPER_CRASH_PLANTED_CAMPAIGNS`` campaigns).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gatekeeper.commit.switches import CRASH_POINTS
from tests.commit_support import build_scenario, check, run_commit

KILLS = int(os.environ.get("GATEKEEPER_CRASH_KILLS", "300"))
PLANTED_CAMPAIGNS = int(os.environ.get("GATEKEEPER_CRASH_PLANTED_CAMPAIGNS", "1"))
WORKERS = 2
KILLS_PER_TRIAL = 12
# Reached only when another writer changes the file between the committer's check and its swap:
# tests/test_commit_changes.py::test_changed_during_the_swap drives it with a pause there.
HOOK_ONLY = ("after_exchange_back",)


@dataclass
class Tally:
    kills: int = 0
    by_point: Counter[str] = field(default_factory=Counter)
    runs: int = 0
    trials: int = 0
    violations: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, point: str, killed: bool) -> None:
        with self.lock:
            self.runs += 1
            if killed:
                self.kills += 1
                self.by_point[point] += 1


def trial(
    root: Path,
    seed: int,
    tally: Tally,
    *,
    kills_wanted: int = KILLS_PER_TRIAL,
    bug: str | None = None,
    real: bool = False,
    random_window: float = 0.05,
) -> list[str]:
    """One scenario, killed up to ``kills_wanted`` times, then finished by a clean run."""
    rng = random.Random(seed)
    sc = build_scenario(root, rng, fresh=rng.randint(4, 10))
    base: dict[str, str] = {"GATEKEEPER_PLANT_BUG": bug} if bug else {}
    if rng.random() < 0.25:
        base["GATEKEEPER_NO_OPENAT2"] = "1"
    if rng.random() < 0.15:
        base["GATEKEEPER_NO_TMPFILE"] = "1"
        sc.allow_tmp = True
    args = ["--once", "--batch", str(rng.choice([1, 1, 2, 3, 7, 64]))]
    points = itertools.cycle(rng.sample(CRASH_POINTS, len(CRASH_POINTS)))
    violations: list[str] = []
    kills = 0
    while kills < kills_wanted and not violations:
        if sc.late and rng.random() < 0.2:
            sc.approve_late()  # approvals keep arriving between crashes
        if rng.random() < 0.75:
            point = next(points)
            spec = f"{point}:{rng.choice([1, 1, 1, 2, 3])}"
            run = run_commit(sc.world, *args, real=real, GATEKEEPER_CRASH_AT=spec, **base)
        else:
            point = "random SIGKILL"
            run = run_commit(sc.world, *args, real=real, kill_after=rng.uniform(0, random_window), **base)
        tally.add(point, run.killed)
        violations += [f"after a kill at {point}: {p}" for p in check(sc, final=False)]
        if run.killed:
            kills += 1
            continue
        if run.code != 0:
            violations.append(f"exit {run.code} without a kill: {run.err.strip()[-500:]}")
        if not sc.approve_late():  # the run finished everything: feed it more, or end the trial
            break
    while sc.approve_late():
        pass
    run = run_commit(sc.world, "--once", real=real, **base)
    if run.code != 0:
        violations.append(f"the final clean run exited {run.code}: {run.err.strip()[-500:]}")
    violations += [f"after the final clean run: {p}" for p in check(sc, final=True)]
    with tally.lock:
        tally.trials += 1
        tally.violations += [f"seed {seed} ({', '.join(f'{k}={v}' for k, v in base.items())}): {v}" for v in violations]
    return violations


def campaign(root: Path, kills: int, *, seed: int, real: bool = False, window: float = 0.05) -> Tally:
    """Trials on ``WORKERS`` threads (each driving its own committer processes) until ``kills``."""
    tally = Tally()
    seeds = itertools.count(seed)
    seeds_lock = threading.Lock()

    def worker() -> None:
        while True:
            with tally.lock:
                if tally.kills >= kills or len(tally.violations) > 20:
                    return
            with seeds_lock:
                s = next(seeds)
            trial(root / f"t{s}", s, tally, real=real, random_window=window)

    with ThreadPoolExecutor(WORKERS) as pool:
        for f in [pool.submit(worker) for _ in range(WORKERS)]:
            f.result()
    return tally


def report(name: str, tally: Tally, seconds: float) -> None:
    print(
        f"\n[{name}] {tally.kills} kills in {tally.runs} runs over {tally.trials} trials, {seconds:.1f} s; "
        f"violations: {len(tally.violations)}\n  by point: {json.dumps(dict(sorted(tally.by_point.items())))}"
    )


@pytest.mark.slow
def test_crash_campaign_keeps_every_invariant(tmp_path: Path) -> None:
    start = time.perf_counter()
    tally = campaign(tmp_path, KILLS, seed=1000)
    report("crash campaign (forked committers)", tally, time.perf_counter() - start)
    assert not tally.violations, "\n".join(tally.violations[:20])
    assert tally.kills >= KILLS
    never = [p for p in CRASH_POINTS if tally.by_point[p] == 0 and p not in HOOK_ONLY]
    assert not never, f"crash points never reached (the campaign does not cover them): {never}"
    assert tally.by_point["random SIGKILL"] >= KILLS // 10


@pytest.mark.slow
def test_crash_campaign_with_real_cli_processes(tmp_path: Path) -> None:
    """The same, with `python -m gatekeeper commit` started from scratch for every run."""
    start = time.perf_counter()
    tally = campaign(tmp_path, 16, seed=5000, real=True, window=1.2)
    report("crash campaign (python -m gatekeeper commit)", tally, time.perf_counter() - start)
    assert not tally.violations, "\n".join(tally.violations[:20])
    assert tally.kills >= 16


@pytest.mark.slow
@pytest.mark.parametrize("bug", ["separate_event", "in_place", "change_in_place"])
def test_the_campaign_catches_each_planted_bug(tmp_path: Path, bug: str) -> None:
    """Run the campaign against a deliberately broken committer: it must report a violation.

    Here: trials until the first violation (at most 20; a trial catches either bug about a third
    of the time). With ``GATEKEEPER_CRASH_PLANTED_CAMPAIGNS=N`` (``make crash``), also N short
    campaigns of 3 trials each, to measure how often one campaign catches it.
    """
    tally = Tally()
    for t in range(20):
        if trial(tmp_path / f"t{t}", 9000 + t, tally, bug=bug):
            break
    print(f"\n[{bug}] caught after {tally.trials} trial(s), {tally.kills} kills: {tally.violations[:1]}")
    assert tally.violations, f"the campaign did not notice the planted {bug} bug"
    if PLANTED_CAMPAIGNS > 1:
        caught, kills_to_catch = 0, []
        for n in range(PLANTED_CAMPAIGNS):
            short = Tally()
            for t in range(3):
                if trial(tmp_path / f"c{n}t{t}", 20_000 + 100 * n + t, short, bug=bug):
                    break
            if short.violations:
                caught += 1
                kills_to_catch.append(short.kills)
        print(f"\n[{bug}] caught in {caught} of {PLANTED_CAMPAIGNS} campaigns of 3 trials; kills: {kills_to_catch}")
        assert caught > 0

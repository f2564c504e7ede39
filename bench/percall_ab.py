"""The fast path's per-call cost, this checkout against another, interleaved in blocks (issue 12).

Why beside fastpath_bench.py: its CPU-per-call figure comes from one soak per variant, read in
clock ticks (10 ms) on a shared machine, so a 5 µs change is lost in the spread. Here every variant
(``direct``, ``gatekeeper``, ``gatekeeper-baseline`` from ``--baseline DIR``, ``relay-poll``) is
open at once and called in blocks, the order rotated each round; each block's proxy CPU (its own
``/proc/PID/task/*/schedstat``, not its child's) divided by the block's calls is one sample, and the
figure is the median of the samples. Latency: p50 of every timed call, and its ratio to direct's.

    .venv/bin/python bench/percall_ab.py --baseline DIR [--rounds 16] [--block 500] [--only notes,fs]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastpath_setup import RawClient, Setup, ensure_filesystem, filesystem, launch, notes
from harness import make_home

VARIANTS = ("direct", "gatekeeper", "gatekeeper-baseline", "relay-poll")


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of one process (not its children), in ns resolution: the sum of
    ``/proc/PID/task/*/schedstat``'s first field (``/proc/PID/stat`` counts 10 ms ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
            continue
    return total / 1e9


def measure(setup: Setup, server_key: str, rounds: int, block: int) -> list[str]:
    """One server: every variant open, blocks of calls rotated; CPU µs per call and p50 per variant."""
    if server_key == "notes":
        server = notes(setup.work)
    else:
        binary = ensure_filesystem()
        if isinstance(binary, str):
            return [f"{server_key}: skipped: {binary}"]
        server = filesystem(setup.work, binary)
    names = [v for v in VARIANTS if v != "gatekeeper-baseline" or setup.baseline is not None]
    clients: dict[str, RawClient] = {}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    times: dict[str, list[float]] = {n: [] for n in names}
    with open(setup.work / f"{server_key}.err", "a", encoding="utf-8") as err:
        try:
            for name in names:
                clients[name] = RawClient(launch(name, server, setup), err)
                clients[name].handshake()
                for _ in range(200):  # warm-up
                    clients[name].call(server.tool, server.args)
            for r in range(rounds):
                order = names[r % len(names) :] + names[: r % len(names)]
                if r // len(names) % 2:
                    order.reverse()  # each variant as often before as after each other one
                for name in order:
                    client = clients[name]
                    before = cpu_seconds(client.proc.pid)
                    for _ in range(block):
                        start = time.perf_counter()
                        client.call(server.tool, server.args)
                        times[name].append(time.perf_counter() - start)
                    cpu[name].append((cpu_seconds(client.proc.pid) - before) / block * 1e6)
        finally:
            for client in clients.values():
                client.close()
    direct = statistics.median(times["direct"])
    lines = []
    if "gatekeeper-baseline" in cpu:  # each round's own ratio: the load of that moment cancels out
        paired = [a / b for a, b in zip(cpu["gatekeeper"], cpu["gatekeeper-baseline"], strict=True)]
        ratio = statistics.median(paired)
        lines.append(f"{server_key} gatekeeper ÷ baseline CPU/call, median of the rounds' ratios: {ratio:.3f}")
    for name in names:
        p50 = statistics.median(times[name])
        samples = ", ".join(f"{c:.0f}" for c in cpu[name])
        lines.append(
            f"{server_key} {name}: CPU/call median {statistics.median(cpu[name]):.1f} µs [{samples}]; "
            f"p50 {p50 * 1e3:.3f} ms, ratio {p50 / direct:.3f}"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another checkout's proxy as gatekeeper-baseline")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--block", type=int, default=500)
    parser.add_argument("--only", default="notes,fs", help="servers: notes, fs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gatekeeper-percall-") as tmp:
        work = Path(tmp)
        setup = Setup(work, make_home(work / "home").path, "not used", baseline=args.baseline)
        for key in args.only.split(","):
            for line in measure(setup, key, args.rounds, args.block):
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

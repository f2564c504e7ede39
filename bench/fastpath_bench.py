"""The fast-path benchmark (issue 12): what an allowed call costs through Gatekeeper, next to the
direct call, two plain relays (the floor) and FastMCP's proxy, all in the same run, round-robin.

Variants, each a process between the client and the server:

- ``direct``: no proxy;
- ``gatekeeper``: ``python -m gatekeeper proxy --policy FILE`` under a temporary GATEKEEPER_HOME, in
  its default downstream mode (``match``: the child spoken to in the client's era); named in
  ``--only``, ``gatekeeper-auto`` and ``gatekeeper-legacy`` run it with that ``--downstream-mode``;
- ``relay-poll`` / ``relay-asyncio``: ``bench/relay.py`` (stdlib only, no MCP);
- ``fastmcp``: FastMCP's ``create_proxy`` over stdio, pinned, in its own venv under the peers cache
  (GATEKEEPER_PEERS_CACHE), installed here once; without the registry its rows say ``skipped``.

Servers: the bundled notes server (``read_note``) and the reference filesystem server
(``read_text_file``, npm, installed by scripts/install_peers.py). Clients: a raw JSON-RPC client
(lines written to the process's stdin, lines read from its stdout, ``time.perf_counter`` per call)
and the SDK ``mcp.Client``. Also the cold start (spawn → initialize answered → tools/list answered),
the proxy's resident memory (VmRSS) idle and after 10,000 calls, and the proxy's import time.
``--runs N`` repeats everything and shows the median with each run's value; ``--profile`` adds a
cProfile of the Gatekeeper proxy process (a bench-side wrapper, not a product switch).

    .venv/bin/python bench/fastpath_bench.py [--quick] [--runs 3] [--profile]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from fastpath_profile import profile_report
from fastpath_setup import (
    COLD_MARGIN_S,
    FASTMCP_PACKAGE,
    FASTMCP_VENV,
    FULL_SIZES,
    IMPORT_S,
    P50_RATIO,
    P99_RATIO,
    QUICK_SIZES,
    RSS_MIB,
    Launch,
    RawClient,
    Server,
    Setup,
    Sizes,
    Skipped,
    available,
    cpu_seconds,
    ensure_fastmcp,
    ensure_filesystem,
    filesystem,
    launch,
    notes,
    rss_mib,
)
from harness import FULL, QUICK, Figure, Report, log, make_home, p50, p99, print_table
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client


@dataclass
class Run:
    """One run's values by row name (the median over runs is taken later), and its context notes."""

    values: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def round_robin(names: tuple[str, ...], reps: int, call: Callable[[str], None]) -> dict[str, list[float]]:
    """``reps`` rounds, one call per variant each, the order rotated each round; latencies in ms."""
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(reps):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            start = time.perf_counter()
            call(name)
            times[name].append((time.perf_counter() - start) * 1000)
    return times


def latency_rows(run: Run, label: str, times: dict[str, list[float]]) -> None:
    d50, d99 = p50(times["direct"]), p99(times["direct"])
    for name, xs in times.items():
        run.values[f"{label} {name} p50"] = p50(xs)
        run.values[f"{label} {name} p99"] = p99(xs)
        if name != "direct":
            run.values[f"{label} {name} ratio p50"] = p50(xs) / d50
            run.values[f"{label} {name} ratio p99"] = p99(xs) / d99


def raw_phase(run: Run, server: Server, setup: Setup, sizes: Sizes) -> None:
    """Cold starts, then every variant open at once, round-robin timed calls, then the soak for RSS."""
    names = available(setup)
    errlog = open(setup.work / f"{server.key}-raw.err", "a", encoding="utf-8")  # noqa: SIM115 (closed below)
    cold: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    with ExitStack() as stack:
        stack.callback(errlog.close)
        log(f"[fastpath] {server.key}: cold start, {sizes.cold_reps} rep(s) per variant, interleaved")
        for _ in range(sizes.cold_reps - 1):  # the last rep is the handshake of the clients kept open below
            for name in names:
                client = RawClient(launch(name, server, setup), errlog)
                try:
                    cold[name].append(client.handshake())
                finally:
                    client.close()
        clients = {}
        for name in names:
            client = RawClient(launch(name, server, setup), errlog)
            stack.callback(client.close)
            cold[name].append(client.handshake())
            clients[name] = client
        for name in names[1:]:
            if name in clients:
                run.values[f"{server.key} {name} RSS idle"] = rss_mib(clients[name].proc.pid)
        log(f"[fastpath] {server.key} raw: {sizes.warmup} warm-up + {sizes.raw_calls} timed calls per variant")
        round_robin(names, sizes.warmup, lambda n: clients[n].call(server.tool, server.args))
        times = round_robin(names, sizes.raw_calls, lambda n: clients[n].call(server.tool, server.args))
        latency_rows(run, f"{server.key} raw", times)
        log(f"[fastpath] {server.key}: soak each proxy to {sizes.soak_calls} calls, then its RSS")
        for name in names[1:]:
            if name in clients:
                client = clients[name]
                calls, cpu = client.calls, cpu_seconds(client.proc.pid)
                while client.calls < sizes.soak_calls:
                    client.call(server.tool, server.args)
                run.values[f"{server.key} {name} RSS after calls"] = rss_mib(client.proc.pid)
                if client.calls > calls:  # the proxy's own CPU per call (not its child's), µs
                    cpu_us = (cpu_seconds(client.proc.pid) - cpu) / (client.calls - calls) * 1e6
                    run.values[f"{server.key} {name} CPU per call"] = cpu_us
    for name, pairs in cold.items():
        run.values[f"{server.key} cold {name} initialize"] = statistics.median(p[0] for p in pairs)
        run.values[f"{server.key} cold {name} tools/list"] = statistics.median(p[1] for p in pairs)


@asynccontextmanager
async def sdk_client(spec: Launch, errlog: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=spec.argv[0], args=spec.argv[1:], env=spec.env, cwd=spec.cwd)
    with open(errlog, "a", encoding="utf-8") as err:
        async with Client(stdio_client(params, errlog=err), mode="auto", cache=None) as client:
            yield client


async def sdk_phase(run: Run, server: Server, setup: Setup, sizes: Sizes) -> None:
    """The same round-robin with the SDK client (its own overhead is part of every variant)."""
    names = available(setup)
    log(f"[fastpath] {server.key} SDK: {sizes.warmup} warm-up + {sizes.sdk_calls} timed calls per variant")
    async with AsyncExitStack() as stack:
        clients = {
            n: await stack.enter_async_context(sdk_client(launch(n, server, setup), setup.work / f"{server.key}.err"))
            for n in names
        }
        for name, client in list(clients.items()):  # a proxy that lost the tool is a note, not a crash
            listed = {t.name for t in (await client.list_tools()).tools}
            if server.tool not in listed:
                run.notes.append(
                    f"{server.key} sdk {name}: left out, tools/list (protocol {client.protocol_version}) "
                    f"has no {server.tool} ({len(listed)} tools)"
                )
                del clients[name]
        names = tuple(n for n in names if n in clients)

        async def call(name: str) -> None:
            result = await clients[name].call_tool(server.tool, server.args)
            if result.is_error:
                raise RuntimeError(f"{name} {server.tool} failed: {result.content}")

        times: dict[str, list[float]] = {n: [] for n in names}
        for i in range(sizes.warmup + sizes.sdk_calls):
            k = i % len(names)
            for name in names[k:] + names[:k]:
                start = time.perf_counter()
                await call(name)
                if i >= sizes.warmup:
                    times[name].append((time.perf_counter() - start) * 1000)
        latency_rows(run, f"{server.key} sdk", times)


def import_time(run: Run, server: Server, setup: Setup) -> None:
    """What a real ``gatekeeper proxy`` session imports, under ``PYTHONPROFILEIMPORTTIME``: spawn,
    initialize, tools/list and one call, then stdin EOF. Self time summed (all of it, and by
    top-level package), and the wall time to the initialize answer under the import profiler."""
    spec = launch("gatekeeper", server, setup)
    spec = Launch(spec.argv, {**spec.env, "PYTHONPROFILEIMPORTTIME": "1"}, spec.cwd)
    errlog = setup.work / f"importtime-{server.key}.log"
    with open(errlog, "w") as err:
        client = RawClient(spec, err)
        try:
            initialized, _listed = client.handshake()
            client.call(server.tool, server.args)
        finally:
            client.stdin.close()
            client.proc.wait(30)
    by_top: dict[str, int] = {}
    for m in re.finditer(r"import time:\s+(\d+) \|\s+\d+ \| *(\S+)", errlog.read_text()):
        top = m.group(2).split(".")[0]
        by_top[top] = by_top.get(top, 0) + int(m.group(1))
    run.values[f"start-up: {server.key} proxy session imports (importtime)"] = sum(by_top.values()) / 1e6
    run.values[f"start-up: {server.key} initialize answered, under importtime"] = initialized
    top = sorted(by_top.items(), key=lambda kv: -kv[1])[:10]
    run.notes.append(
        f"{server.key}: proxy session import self time by top-level package (ms): "
        + ", ".join(f"{k} {v / 1000:.0f}" for k, v in top)
    )


def one_run(setup: Setup, servers: list[Server], sizes: Sizes) -> Run:
    run = Run()
    for server in servers:
        raw_phase(run, server, setup, sizes)
        anyio.run(sdk_phase, run, server, setup, sizes)
        import_time(run, server, setup)
    return run


# -- the table -------------------------------------------------------------------------------------


# row name part -> table group
GROUPS = (("cold", "F2."), ("RSS", "F3."), ("CPU", "F3."), ("start-up", "F4."), ("", "F1."))


def figures(runs: list[Run], servers: list[Server], setup: Setup, skipped: list[Figure]) -> list[Figure]:
    """Rows with the median over runs as the value and every run's value in the note."""

    def row(name: str, unit: str, target: float | None = None, cmp: str = "<", note: str = "") -> Figure | None:
        xs = [r.values[name] for r in runs if name in r.values]
        if not xs:
            return None
        group = next(g for key, g in GROUPS if key in name)
        each = ", ".join(f"{x:.3g}" for x in xs)
        spread = f"runs: {each}" + (f" (spread {min(xs):.3g}–{max(xs):.3g})" if len(xs) > 1 else "")
        note = f"{spread}; {note}" if note else spread
        return Figure(f"{group} {name}", statistics.median(xs), unit, target, cmp, note)

    out: list[Figure | None] = []
    names = available(setup)
    for server in servers:
        for client in ("raw", "sdk"):
            label = f"{server.key} {client}"
            for name in names:
                out.append(row(f"{label} {name} p50", "ms"))
                out.append(row(f"{label} {name} p99", "ms"))
            for name in names[1:]:
                gate = name == "gatekeeper" and client == "raw"
                out.append(row(f"{label} {name} ratio p50", "x", P50_RATIO if gate else None))
                out.append(row(f"{label} {name} ratio p99", "x", P99_RATIO if gate else None))
        for name in names:
            out.append(row(f"{server.key} cold {name} initialize", "s"))
            out.append(row(f"{server.key} cold {name} tools/list", "s"))
        margins = [
            r.values[f"{server.key} cold gatekeeper tools/list"] - r.values[f"{server.key} cold direct tools/list"]
            for r in runs
        ]
        for r, m in zip(runs, margins, strict=True):
            r.values[f"{server.key} cold gatekeeper minus direct"] = m
        out.append(row(f"{server.key} cold gatekeeper minus direct", "s", COLD_MARGIN_S))
        for name in names[1:]:
            gate = name == "gatekeeper"
            out.append(row(f"{server.key} {name} RSS idle", "MiB", RSS_MIB if gate else None))
            out.append(row(f"{server.key} {name} RSS after calls", "MiB"))
            out.append(row(f"{server.key} {name} CPU per call", "µs"))
    for server in servers:
        out.append(row(f"start-up: {server.key} proxy session imports (importtime)", "s", IMPORT_S))
        out.append(row(f"start-up: {server.key} initialize answered, under importtime", "s"))
    return [*(f for f in out if f is not None), *skipped]


QUICK_ONLY = ("gatekeeper", "relay-poll")
"""``bench/run.py --quick`` (a smoke test, part of ``make test``): the proxy beside the floor, every
row kind once; the other relays and FastMCP (a venv install on a fresh clone) only in the full run."""


def run_in(
    base: Path, sizes: Sizes, runs: int, profile: bool, only: tuple[str, ...] = (), baseline: Path | None = None
) -> tuple[list[Figure], list[str]]:
    """All fast-path rows (medians over ``runs``) and the notes, built in ``base``."""
    skipped: list[Figure] = []
    fastmcp = ensure_fastmcp() if not only or "fastmcp" in only else "left out (not in --only)"
    if isinstance(fastmcp, str):
        skipped.append(Skipped("F0. fastmcp proxy", 0.0, "", note=fastmcp))
    fs = ensure_filesystem()
    setup = Setup(base, make_home(base / "home").path, fastmcp, only=only, baseline=baseline)
    servers = [notes(base)]
    if isinstance(fs, Path):
        servers.append(filesystem(base, fs))
    else:
        skipped.append(Skipped("F0. fs rows (filesystem server)", 0.0, "", note=fs))
    all_runs = []
    for i in range(runs):
        log(f"[fastpath] run {i + 1} of {runs}")
        all_runs.append(one_run(setup, servers, sizes))
    notes_out = [f"run {i + 1}: {n}" for i, r in enumerate(all_runs) for n in r.notes]
    notes_out.append(f"{FASTMCP_PACKAGE} in {FASTMCP_VENV}" if isinstance(fastmcp, Path) else "fastmcp skipped")
    if profile:
        setup.profile_dir = base / "profiles"
        setup.profile_dir.mkdir(exist_ok=True)
        notes_out += profile_report(setup, servers)
    return figures(all_runs, servers, setup, skipped), notes_out


def run(quick: bool, work: Path | None = None, runs: int = 1, profile: bool = False) -> list[Figure]:
    """The rows for bench/run.py's table, built in a fresh ``fastpath-bench/`` of ``work`` (or a temp folder)."""
    sizes = QUICK_SIZES if quick else FULL_SIZES
    only = QUICK_ONLY if quick else ()
    if work is not None:
        base = work / "fastpath-bench"
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        return run_in(base, sizes, runs, profile, only)[0]
    with tempfile.TemporaryDirectory(prefix="gatekeeper-fastpath-bench-") as tmp:
        return run_in(Path(tmp), sizes, runs, profile, only)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few calls, one cold start each: a smoke test")
    parser.add_argument("--runs", type=int, default=1, help="repeat everything N times; rows show the median")
    parser.add_argument("--profile", action="store_true", help="also cProfile the Gatekeeper proxy process")
    parser.add_argument("--only", default="", help="comma-separated variants to run (direct always runs)")
    parser.add_argument(
        "--baseline", type=Path, help="another checkout's proxy as variant gatekeeper-baseline (A/B in one run)"
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="gatekeeper-fastpath-") as tmp:
            report = Report()
            sizes = QUICK_SIZES if args.quick else FULL_SIZES
            only = tuple(n.strip() for n in args.only.split(",") if n.strip()) or (QUICK_ONLY if args.quick else ())
            rows, notes_out = run_in(Path(tmp), sizes, args.runs, args.profile, only, args.baseline)
            for figure in rows:
                report.add(figure)
            report.notes += notes_out
            print_table(report, QUICK if args.quick else FULL, Path(tmp), time.perf_counter() - start)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

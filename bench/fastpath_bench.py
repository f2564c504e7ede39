"""The fast-path benchmark (issue 12): what an allowed call costs through Gatekeeper, next to the
direct call, two plain relays (the floor) and FastMCP's proxy, all in the same run, round-robin.

Variants, each a process between the client and the server:

- ``direct``: no proxy;
- ``gatekeeper``: ``python -m gatekeeper proxy --policy FILE`` under a temporary GATEKEEPER_HOME;
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
import fcntl
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
from harness import FULL, QUICK, Figure, Report, log, make_home, p50, p99, print_table
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
PY = sys.executable
CACHE = Path(os.environ.get("GATEKEEPER_PEERS_CACHE", REPO / ".cache"))
FASTMCP_PACKAGE = "fastmcp==4.2.3"
FASTMCP_VENV = CACHE / "fastmcp-venv"
PROTOCOL = "2025-11-25"  # the filesystem server speaks only this one

P50_RATIO, P99_RATIO, COLD_MARGIN_S, RSS_MIB = 1.2, 1.3, 0.3, 50.0
VARIANTS = ("direct", "gatekeeper", "relay-poll", "relay-asyncio", "fastmcp")
PROXIES = VARIANTS[1:]

# FastMCP's own proxy, run by the venv's python: ``python -c FASTMCP_PROXY COMMAND ARGS...``.
FASTMCP_PROXY = """
import os, sys
from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy
target = StdioTransport(command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ))
create_proxy(target, name="fastmcp-bench-proxy").run(transport="stdio", show_banner=False)
"""

# The Gatekeeper proxy under cProfile (``--profile`` only): stats dumped when the proxy returns.
PROFILED = """
import cProfile, runpy, sys
out = sys.argv.pop(1)
sys.argv[0] = "gatekeeper"
prof = cProfile.Profile()
prof.enable()
try:
    runpy.run_module("gatekeeper", run_name="__main__")
except SystemExit:
    pass
finally:
    prof.disable()
    prof.dump_stats(out)
"""


@dataclass(frozen=True)
class Sizes:
    warmup: int
    raw_calls: int  # timed calls per variant with the raw client
    sdk_calls: int  # timed calls per variant with the SDK client
    soak_calls: int  # total calls on each proxy before its resident memory is read again
    cold_reps: int


FULL_SIZES = Sizes(warmup=50, raw_calls=1000, sdk_calls=300, soak_calls=10_000, cold_reps=5)
QUICK_SIZES = Sizes(warmup=5, raw_calls=60, sdk_calls=20, soak_calls=200, cold_reps=1)


@dataclass
class Skipped(Figure):
    """A row that could not be measured: shown as ``skipped: <reason>``, never a failure."""

    @property
    def shown(self) -> str:
        return f"skipped: {self.note.splitlines()[0][:70]}" if self.note else "skipped"


# -- peers -----------------------------------------------------------------------------------------


@contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_fastmcp() -> Path | str:
    """FastMCP's python in its own venv (installed once, pinned); else the reason it is missing."""
    python = FASTMCP_VENV / "bin" / "python"
    stamp = FASTMCP_VENV / ".installed"
    with _locked("fastmcp-venv"):
        if stamp.exists() and stamp.read_text().strip() == FASTMCP_PACKAGE:
            return python
        log(f"[fastpath] pip install {FASTMCP_PACKAGE} into {FASTMCP_VENV} ...")
        for cmd in (
            [PY, "-m", "venv", "--clear", str(FASTMCP_VENV)],
            [str(python), "-m", "pip", "install", "--quiet", FASTMCP_PACKAGE],
            [str(python), "-c", "import fastmcp.server, fastmcp.client.transports"],
        ):
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return f"{FASTMCP_PACKAGE} not installed: {exc}"
            if done.returncode != 0:
                lines = [ln for ln in (done.stderr or done.stdout).splitlines() if not ln.startswith("WARNING")]
                return f"{FASTMCP_PACKAGE} not installed: {(lines or ['no output'])[-1]}"
        stamp.write_text(FASTMCP_PACKAGE + "\n")
        return python


def ensure_filesystem() -> Path | str:
    """The reference filesystem server, through scripts/install_peers.py; else the reason."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import install_peers  # the project's one installer of interop peers

        return install_peers.ensure_filesystem_server()
    except Exception as exc:  # no npm, no registry: a skipped row, not a crashed bench
        return f"{type(exc).__name__}: {exc}"
    finally:
        sys.path.remove(str(REPO / "scripts"))


# -- servers and variants --------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """A downstream server: how to start it, its Gatekeeper policy entry, and the call to time."""

    key: str
    argv: list[str]
    env: dict[str, str]
    policy: str
    tool: str
    args: dict[str, Any]


def notes(work: Path) -> Server:
    ws = work / "notes-ws"
    (ws / "notes").mkdir(parents=True, exist_ok=True)
    (ws / "notes" / "small.md").write_text("# Small\n\nA short note, read again and again.\n" * 3)
    policy = f"""
  notes:
    command: {PY}
    args: ["-m", "gatekeeper.demo.notes_server", "{ws}"]
    workspace: {ws}
    env: {{PYTHONPATH: "{REPO}"}}
    tools:
      read_note: allow
      list_notes: allow
"""
    argv = [PY, "-m", "gatekeeper.demo.notes_server", str(ws)]
    return Server("notes", argv, {"PYTHONPATH": str(REPO)}, policy, "read_note", {"path": "notes/small.md"})


def filesystem(work: Path, binary: Path) -> Server:
    ws = (work / "fs-ws").resolve()
    ws.mkdir(parents=True, exist_ok=True)
    small = ws / "small.txt"
    small.write_text("A short file, read again and again.\n" * 3)
    policy = f"""
  files:
    command: {binary.resolve()}
    args: ["{ws}"]
    workspace: {ws}
    tools:
      read_text_file: allow
"""
    return Server("fs", [str(binary.resolve()), str(ws)], {}, policy, "read_text_file", {"path": str(small)})


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None


@dataclass
class Setup:
    """Where this run lives and what it could install."""

    work: Path
    home: Path
    fastmcp: Path | str  # the venv's python, or why it is missing
    profile_dir: Path | None = None


def launch(variant: str, server: Server, setup: Setup) -> Launch:
    """The command line of ``variant`` in front of ``server``."""
    if variant == "direct":
        return Launch(server.argv, server.env)
    if variant == "gatekeeper":
        policy = setup.work / f"policy-{server.key}.yaml"
        policy.write_text("version: 1\nservers:\n" + server.policy)
        env = {"GATEKEEPER_HOME": str(setup.home), "PYTHONPATH": str(REPO), "GATEKEEPER_START_TIMEOUT": "20"}
        args = ["-m", "gatekeeper", "proxy", "--policy", str(policy)]
        if setup.profile_dir is not None:
            out = setup.profile_dir / f"gatekeeper-{server.key}-{time.monotonic_ns()}.prof"
            return Launch([PY, "-c", PROFILED, str(out), *args[2:]], env, str(setup.work))
        return Launch([PY, *args], env, str(setup.work))
    if variant.startswith("relay-"):
        return Launch([PY, str(BENCH / "relay.py"), variant.removeprefix("relay-"), "--", *server.argv], server.env)
    if variant == "fastmcp" and isinstance(setup.fastmcp, Path):
        return Launch([str(setup.fastmcp), "-c", FASTMCP_PROXY, *server.argv], server.env)
    raise ValueError(f"no such variant here: {variant}")


def available(setup: Setup) -> tuple[str, ...]:
    return tuple(v for v in VARIANTS if v != "fastmcp" or isinstance(setup.fastmcp, Path))


def rss_mib(pid: int) -> float:
    """Resident memory of one process (not its children), MiB, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


# -- the raw JSON-RPC client -----------------------------------------------------------------------


class RawClient:
    """Lines to the process's stdin, lines from its stdout: the least a client can do per call."""

    def __init__(self, spec: Launch, errlog: IO[str]) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            spec.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            env={**os.environ, **spec.env},
            cwd=spec.cwd,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.next_id = 0
        self.calls = 0

    def send(self, message: dict[str, Any]) -> None:
        self.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        self.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and read until its answer (server requests get -32601, notifications skipped)."""
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.stdout.readline()
            if not line:
                raise RuntimeError(f"{method}: the process closed its stdout (exit {self.proc.poll()})")
            msg = json.loads(line)
            if "method" in msg:
                if "id" in msg:
                    self.send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}})
                continue
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method} failed: {msg['error']}")
                return msg["result"]

    def handshake(self) -> tuple[float, float]:
        """initialize, initialized, tools/list; seconds from spawn to each answer."""
        self.request(
            "initialize",
            {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "fastpath-bench", "version": "1"}},
        )
        initialized = time.perf_counter() - self.started
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools = self.request("tools/list", {})
        listed = time.perf_counter() - self.started
        if not tools.get("tools"):
            raise RuntimeError("tools/list answered with no tools")
        return initialized, listed

    def call(self, tool: str, args: dict[str, Any]) -> None:
        self.calls += 1
        result = self.request("tools/call", {"name": tool, "arguments": args})
        if result.get("isError"):
            raise RuntimeError(f"{tool} failed: {result.get('content')}")

    def close(self) -> None:
        self.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stdout.close()


# -- one run ---------------------------------------------------------------------------------------


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
        for name in PROXIES:
            if name in clients:
                run.values[f"{server.key} {name} RSS idle"] = rss_mib(clients[name].proc.pid)
        log(f"[fastpath] {server.key} raw: {sizes.warmup} warm-up + {sizes.raw_calls} timed calls per variant")
        round_robin(names, sizes.warmup, lambda n: clients[n].call(server.tool, server.args))
        times = round_robin(names, sizes.raw_calls, lambda n: clients[n].call(server.tool, server.args))
        latency_rows(run, f"{server.key} raw", times)
        log(f"[fastpath] {server.key}: soak each proxy to {sizes.soak_calls} calls, then its RSS")
        for name in PROXIES:
            if name in clients:
                client = clients[name]
                while client.calls < sizes.soak_calls:
                    client.call(server.tool, server.args)
                run.values[f"{server.key} {name} RSS after calls"] = rss_mib(client.proc.pid)
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


# what ``gatekeeper proxy`` imports before it spawns a child (the CLI imports the rest lazily)
PROXY_IMPORTS = ", ".join(
    [
        "gatekeeper.cli",
        "gatekeeper.policy",
        "gatekeeper.proxy.run",
        "gatekeeper.proxy.server",
        "gatekeeper.store.version",
    ]
)


def import_time(run: Run) -> None:
    """What ``gatekeeper proxy`` imports before it spawns a child, under ``-X importtime``: the wall
    time, and the self time summed by top-level package (which packages dominate)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for name, code in (("python -c pass", "pass"), ("import proxy modules", f"import {PROXY_IMPORTS}")):
        start = time.perf_counter()
        done = subprocess.run([PY, "-X", "importtime", "-c", code], capture_output=True, text=True, env=env)
        run.values[f"start-up: {name} wall"] = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"{code}: {done.stderr.strip().splitlines()[-1:]}")
    by_top: dict[str, int] = {}
    for m in re.finditer(r"import time:\s+(\d+) \|\s+\d+ \| *(\S+)", done.stderr):
        top = m.group(2).split(".")[0]
        by_top[top] = by_top.get(top, 0) + int(m.group(1))
    run.values["start-up: import proxy modules (importtime)"] = sum(by_top.values()) / 1e6
    top = sorted(by_top.items(), key=lambda kv: -kv[1])[:10]
    run.notes.append(
        "proxy import self time by top-level package (ms): " + ", ".join(f"{k} {v / 1000:.0f}" for k, v in top)
    )


def one_run(setup: Setup, servers: list[Server], sizes: Sizes) -> Run:
    run = Run()
    for server in servers:
        raw_phase(run, server, setup, sizes)
        anyio.run(sdk_phase, run, server, setup, sizes)
    import_time(run)
    return run


# -- the table -------------------------------------------------------------------------------------


GROUPS = (("cold", "F2."), ("RSS", "F3."), ("start-up", "F4."), ("", "F1."))  # row name part -> table group


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
        for name in PROXIES:
            if name in names:
                gate = name == "gatekeeper"
                out.append(row(f"{server.key} {name} RSS idle", "MiB", RSS_MIB if gate else None))
                out.append(row(f"{server.key} {name} RSS after calls", "MiB"))
    out.append(row("start-up: python -c pass wall", "s"))
    out.append(row("start-up: import proxy modules wall", "s"))
    out.append(row("start-up: import proxy modules (importtime)", "s"))
    return [*(f for f in out if f is not None), *skipped]


PROFILE_CALLS = 2000  # enough that the calls, not the start-up, fill the profile
# (end of the file name, function) -> what it counts; plain functions only, since cProfile counts
# every resumption of a coroutine as another call
PER_CALL = {
    ("base_events.py", "_run_once"): "event-loop iterations",
    ("~", "validate_json"): "pydantic validate_json",
    ("~", "validate_python"): "pydantic validate_python",
    ("json/__init__.py", "loads"): "json.loads",
    ("~", "posix.write"): "os.write in the loop's thread",
}


def per_call(stats: Any) -> str:
    """How often the proxy's main thread does each costly thing per call, and own time by package."""
    counts = dict.fromkeys(PER_CALL, 0)
    by_area: dict[str, float] = {}
    for (filename, _line, func), (_cc, ncalls, tottime, _ct, _callers) in stats.stats.items():
        builtin = re.match(r"<(?:method|built-in method) '?([\w.]+)", func)
        name = builtin.group(1) if builtin else func
        for end, fn in PER_CALL:
            if name == fn and filename.endswith(end):
                counts[end, fn] += ncalls
        if "epoll" in func:
            area = "waiting in epoll"
        elif "site-packages/" in filename:
            area = filename.split("site-packages/")[1].split("/")[0]
        elif "/gatekeeper/" in filename:
            area = "gatekeeper"
        elif filename == "~":
            area = f"builtin {name}"
        elif "/lib/python" in filename:
            parent = Path(filename).parent.name
            area = "stdlib " + (Path(filename).stem if parent.startswith("python") else parent)
        else:
            area = filename
        by_area[area] = by_area.get(area, 0.0) + tottime
    each = ", ".join(f"{counts[k] / PROFILE_CALLS:.1f} {what}" for k, what in PER_CALL.items())
    areas = ", ".join(f"{k} {v:.2f} s" for k, v in sorted(by_area.items(), key=lambda kv: -kv[1])[:14])
    return f"per call: {each}; own time by area (incl. start-up imports): {areas}"


def profile_report(setup: Setup, servers: list[Server]) -> list[str]:
    """Raw calls through the Gatekeeper proxy under cProfile (its main thread: the event loop);
    the top functions by own time and by cumulative time."""
    import pstats

    assert setup.profile_dir is not None
    lines = []
    for server in servers:
        for old in setup.profile_dir.glob("*.prof"):
            old.unlink()
        with open(setup.work / "profile.err", "a", encoding="utf-8") as err:
            client = RawClient(launch("gatekeeper", server, setup), err)
            try:
                client.handshake()
                for _ in range(PROFILE_CALLS):
                    client.call(server.tool, server.args)
            finally:
                client.close()
        dumps = sorted(setup.profile_dir.glob("*.prof"))
        if not dumps:
            lines.append(f"profile {server.key}: no stats written (the proxy did not return normally)")
            continue
        buf = io.StringIO()
        stats = pstats.Stats(str(dumps[-1]), stream=buf)
        lines.append(f"profile of the gatekeeper proxy, {server.key}, {PROFILE_CALLS} raw calls: {per_call(stats)}")
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_callers(r"to_thread.py:\d+\(run_sync\)")  # who hops to a thread
        lines.append(buf.getvalue())
    return lines


def run_in(base: Path, sizes: Sizes, runs: int, profile: bool) -> tuple[list[Figure], list[str]]:
    """All fast-path rows (medians over ``runs``) and the notes, built in ``base``."""
    skipped: list[Figure] = []
    fastmcp = ensure_fastmcp()
    if isinstance(fastmcp, str):
        skipped.append(Skipped("F0. fastmcp proxy", 0.0, "", note=fastmcp))
    fs = ensure_filesystem()
    setup = Setup(base, make_home(base / "home").path, fastmcp)
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
    if work is not None:
        base = work / "fastpath-bench"
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        return run_in(base, sizes, runs, profile)[0]
    with tempfile.TemporaryDirectory(prefix="gatekeeper-fastpath-bench-") as tmp:
        return run_in(Path(tmp), sizes, runs, profile)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few calls, one cold start each: a smoke test")
    parser.add_argument("--runs", type=int, default=1, help="repeat everything N times; rows show the median")
    parser.add_argument("--profile", action="store_true", help="also cProfile the Gatekeeper proxy process")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="gatekeeper-fastpath-") as tmp:
            report = Report()
            sizes = QUICK_SIZES if args.quick else FULL_SIZES
            rows, notes_out = run_in(Path(tmp), sizes, args.runs, args.profile)
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

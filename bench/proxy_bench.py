"""Proxy benchmarks, side by side in one run: a read call direct vs through the proxy, the
proposal round trip, and the cold start to the first ``tools/list`` answer.

Everything is real: the proxy is ``python -m gatekeeper proxy --policy FILE`` as a stdio
subprocess under a temporary GATEKEEPER_HOME, driven by the official SDK ``Client``; the
downstream servers are the bundled demo notes server, the reference filesystem server (npm) and
the tests' probe server. A missed target prints MISSED; only a crash exits 1.

    .venv/bin/python bench/proxy_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from harness import Figure, count_rows, interleaved, log, make_home, p50, p99, standalone
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent

PY = sys.executable
FS_PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"
FS_CACHE = REPO / ".cache" / "npm-fs"  # git-ignored (.cache/)
FS_BIN = FS_CACHE / "node_modules" / ".bin" / "mcp-server-filesystem"

READ_RATIO, ADDED_MS, PROPOSE_MS, COLD_MARGIN_S = 1.5, 1.0, 5.0, 0.3


@dataclass(frozen=True)
class Sizes:
    warmup: int
    reads: int  # timed calls per side
    proposals: int
    cold_reps: int


FULL_SIZES = Sizes(warmup=20, reads=400, proposals=300, cold_reps=5)
QUICK_SIZES = Sizes(warmup=10, reads=40, proposals=30, cold_reps=1)


@dataclass
class Skipped(Figure):
    """A row that could not be measured: shown as ``skipped: <reason>``, never a failure."""

    @property
    def shown(self) -> str:
        return f"skipped: {self.note.splitlines()[0][:60]}" if self.note else "skipped"


# -- policies ------------------------------------------------------------------------------------

NOTES = """
  {name}:
    command: {py}
    args: ["-m", "gatekeeper.demo.notes_server", "{workspace}"]
    workspace: {workspace}
    env: {{PYTHONPATH: "{repo}"}}
    tools:
      read_note: allow
      list_notes: allow
      create_note:
        propose:
          path: {{template: "notes/{{{{ args.title | slug }}}}.md"}}
          content: {{arg: body}}
          globs: ["notes/**/*.md"]
          max_bytes: 1000
"""

PROBE = """
  {name}:
    command: {py}
    args: ["-m", "tests.peers.probe_server"]
    cwd: {repo}
    workspace: {workspace}
    env: {{PYTHONPATH: "{repo}"}}
    tools:
      echo: allow
      pid: allow
"""

FILESYSTEM = """
  {name}:
    command: {command}
    args: ["{workspace}"]
    workspace: {workspace}
    tools:
      read_text_file: allow
      write_file:
        propose:
          path: {{arg: path}}
          content: {{arg: content}}
"""


def write_policy(path: Path, *servers: str) -> Path:
    path.write_text("version: 1\nservers:\n" + "".join(servers))
    return path


def notes_server(workspace: Path, name: str = "notes") -> str:
    return NOTES.format(name=name, py=PY, workspace=workspace, repo=REPO)


def probe_server(workspace: Path, name: str) -> str:
    return PROBE.format(name=name, py=PY, workspace=workspace, repo=REPO)


# -- clients ---------------------------------------------------------------------------------------


@asynccontextmanager
async def connect(params: StdioServerParameters, errlog: Path) -> AsyncIterator[Client]:
    """One SDK client over stdio (the host's default mode); the child's stderr goes to a file."""
    with open(errlog, "a", encoding="utf-8") as err:
        async with Client(stdio_client(params, errlog=err), mode="auto", cache=None) as client:
            yield client


def proxy_params(policy: Path, home: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=PY,
        args=["-m", "gatekeeper", "proxy", "--policy", str(policy)],
        env={"GATEKEEPER_HOME": str(home), "PYTHONPATH": str(REPO), "GATEKEEPER_START_TIMEOUT": "20"},
        cwd=str(policy.parent),
    )


def notes_params(workspace: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=PY, args=["-m", "gatekeeper.demo.notes_server", str(workspace)], env={"PYTHONPATH": str(REPO)}
    )


def probe_params() -> StdioServerParameters:
    return StdioServerParameters(
        command=PY, args=["-m", "tests.peers.probe_server"], env={"PYTHONPATH": str(REPO)}, cwd=str(REPO)
    )


async def checked(client: Client, tool: str, args: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, args)
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return result


# -- 1. a read, direct vs through the proxy -------------------------------------------------------


async def side_by_side(
    direct: Client, proxied: Client, call: Callable[[Client], Awaitable[Any]], sizes: Sizes
) -> tuple[list[float], list[float]]:
    """The same call on both clients, interleaved (see harness.interleaved); latencies in ms."""
    return await interleaved(lambda: call(direct), lambda: call(proxied), sizes.warmup, sizes.reads)


def read_figures(label: str, direct: list[float], proxied: list[float]) -> list[Figure]:
    ratio = p50(proxied) / p50(direct)
    return [
        Figure(f"P1{label} direct p50", p50(direct), "ms", note=f"p99 {p99(direct):.2f} ms, {len(direct)} calls"),
        Figure(f"P1{label} direct p99", p99(direct), "ms"),
        Figure(f"P1{label} proxied p50", p50(proxied), "ms"),
        Figure(f"P1{label} proxied p99", p99(proxied), "ms"),
        Figure(f"P1{label} ratio p50 proxied/direct", ratio, "x", READ_RATIO, "<"),
        Figure(f"P1{label} ratio p99 proxied/direct", p99(proxied) / p99(direct), "x"),
        Figure(f"P1{label} added p50", p50(proxied) - p50(direct), "ms", ADDED_MS, "<"),
    ]


async def notes_reads_and_proposals(work: Path, home: Path, sizes: Sizes) -> list[Figure]:
    workspace = work / "notes-ws"
    (workspace / "notes").mkdir(parents=True)
    (workspace / "notes" / "small.md").write_text("# Small\n\nA short note, read again and again.\n" * 3)
    policy = write_policy(work / "notes-policy.yaml", notes_server(workspace))
    log(f"[P1a] read_note: {sizes.warmup} warm-up + {sizes.reads} timed calls per side, alternating")

    async def read(c: Client) -> Any:
        return await checked(c, "read_note", {"path": "notes/small.md"})

    async with (
        connect(notes_params(workspace), work / "notes-direct.err") as d,
        connect(proxy_params(policy, home), work / "notes-proxy.err") as p,
    ):
        direct, proxied = await side_by_side(d, p, read, sizes)
        figures = read_figures("a. read_note (notes)", direct, proxied)
        figures[0].note += f"; host protocol direct {d.protocol_version}, proxied {p.protocol_version}"
        log(f"[P2] create_note through the proxy: {sizes.proposals} distinct proposals")
        times = []
        for i in range(sizes.proposals):
            args = {"title": f"bench note {i}", "body": f"# bench note {i}\n\nproposed by the bench\n"}
            start = time.perf_counter()
            result = await checked(p, "create_note", args)
            times.append((time.perf_counter() - start) * 1000)
            if i == 0 and (result.structured_content or {}).get("status") != "pending_approval":
                raise RuntimeError(f"create_note did not propose: {result}")
    made = count_rows(home / "gatekeeper.db", "proposal")
    if made != sizes.proposals:
        raise RuntimeError(f"{made} proposals recorded, expected {sizes.proposals}")
    figures += [
        Figure(
            "P2. create_note proposal p50",
            p50(times),
            "ms",
            PROPOSE_MS,
            "<",
            note=f"{len(times)} distinct titles, each a durable proposal (FULL sync); {made} rows recorded",
        ),
        Figure("P2. create_note proposal p99", p99(times), "ms"),
    ]
    return figures


def install_filesystem_server() -> str | None:
    """npm-install the reference server into the git-ignored cache once; the reason if that fails."""
    if FS_BIN.exists():
        return None
    if shutil.which("npm") is None or shutil.which("node") is None:
        return "node/npm not found"
    FS_CACHE.mkdir(parents=True, exist_ok=True)
    log(f"[P1b] npm install {FS_PACKAGE} into {FS_CACHE} ...")
    try:
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(FS_CACHE), FS_PACKAGE],
            capture_output=True,
            text=True,
            timeout=180,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"npm install failed: {exc}"
    if done.returncode != 0 or not FS_BIN.exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"npm install exited {done.returncode}: {tail[0]}"
    return None


async def filesystem_reads(work: Path, home: Path, sizes: Sizes) -> list[Figure]:
    name = "P1b. read_text_file (filesystem)"
    reason = install_filesystem_server()
    if reason is not None:
        return [Skipped(name, 0.0, "", note=reason)]
    workspace = (work / "fs-ws").resolve()
    workspace.mkdir()
    small = workspace / "small.txt"
    small.write_text("A short file, read again and again.\n" * 3)
    policy = write_policy(
        work / "fs-policy.yaml", FILESYSTEM.format(name="files", command=FS_BIN.resolve(), workspace=workspace)
    )
    log(f"[P1b] read_text_file: {sizes.warmup} warm-up + {sizes.reads} timed calls per side, alternating")
    params = StdioServerParameters(command=str(FS_BIN.resolve()), args=[str(workspace)])

    async def read(c: Client) -> Any:
        return await checked(c, "read_text_file", {"path": str(small)})

    try:
        async with (
            connect(params, work / "fs-direct.err") as d,
            connect(proxy_params(policy, home), work / "fs-proxy.err") as p,
        ):
            direct, proxied = await side_by_side(d, p, read, sizes)
            protocols = f"host protocol direct {d.protocol_version}, proxied {p.protocol_version}"
    except Exception as exc:  # a server that will not start is a skipped row, not a crashed bench
        return [Skipped(name, 0.0, "", note=f"{type(exc).__name__}: {exc}")]
    figures = read_figures("b. read_text_file (fs)", direct, proxied)
    figures[0].note += f"; {protocols}; {FS_PACKAGE}"
    return figures


# -- 3. cold start ---------------------------------------------------------------------------------


async def cold(params: StdioServerParameters, errlog: Path) -> float:
    """Spawn, connect, and wait for the first tools/list answer; seconds (shutdown not counted)."""
    start = time.perf_counter()
    async with connect(params, errlog) as client:
        tools = await client.list_tools()
        elapsed = time.perf_counter() - start
    if not tools.tools:
        raise RuntimeError("tools/list answered with no tools")
    return elapsed


async def cold_starts(work: Path, home: Path, sizes: Sizes) -> list[Figure]:
    workspace = work / "cold-ws"
    (workspace / "notes").mkdir(parents=True)
    one = write_policy(work / "cold-1.yaml", notes_server(workspace))
    three = write_policy(
        work / "cold-3.yaml",
        notes_server(workspace),
        probe_server(workspace, "probe_a"),
        probe_server(workspace, "probe_b"),
    )
    log(f"[P3] cold start to the first tools/list: {sizes.cold_reps} rep(s) of each, interleaved")
    runs: dict[str, list[float]] = {"notes": [], "probe": [], "proxy1": [], "proxy3": []}
    for _ in range(sizes.cold_reps):
        runs["notes"].append(await cold(notes_params(workspace), work / "cold-notes.err"))
        runs["probe"].append(await cold(probe_params(), work / "cold-probe.err"))
        runs["proxy1"].append(await cold(proxy_params(one, home), work / "cold-proxy1.err"))
        runs["proxy3"].append(await cold(proxy_params(three, home), work / "cold-proxy3.err"))
    med = {k: statistics.median(v) for k, v in runs.items()}
    slowest = max(("notes", "probe"), key=lambda k: med[k])
    margin = med["proxy3"] - med[slowest]

    def each(k: str) -> str:
        return "runs: " + ", ".join(f"{v:.2f}" for v in runs[k])

    return [
        Figure("P3. cold start, notes server direct", med["notes"], "s", note=each("notes")),
        Figure("P3. cold start, probe server direct", med["probe"], "s", note=each("probe")),
        Figure("P3. cold start, proxy + 1 server", med["proxy1"], "s", note=each("proxy1")),
        Figure(
            "P3. cold start, proxy + 3 servers",
            med["proxy3"],
            "s",
            note=each("proxy3") + " (notes, probe_a, probe_b)",
        ),
        Figure(
            "P3. 3 servers minus slowest direct",
            margin,
            "s",
            COLD_MARGIN_S,
            "<",
            note=f"proxy + 3 servers {med['proxy3']:.2f} s - slowest alone ({slowest}) {med[slowest]:.2f} s",
        ),
    ]


# -- entry points ----------------------------------------------------------------------------------


async def _run(work: Path, sizes: Sizes) -> list[Figure]:
    home = make_home(work / "home").path
    figures = await notes_reads_and_proposals(work, home, sizes)
    figures += await filesystem_reads(work, home, sizes)
    figures += await cold_starts(work, home, sizes)
    return figures


def run(quick: bool, work: Path | None = None) -> list[Figure]:
    """All proxy figures, built in ``work`` (a temporary folder when None)."""
    sizes = QUICK_SIZES if quick else FULL_SIZES
    if work is not None:  # e.g. bench/run.py's --workdir: always start from an empty folder
        work = work / "proxy-bench"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        return anyio.run(_run, work, sizes)
    with tempfile.TemporaryDirectory(prefix="gatekeeper-proxy-bench-") as tmp:
        return anyio.run(_run, Path(tmp), sizes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and one cold start each, < 20 s")
    args = parser.parse_args(argv)
    return standalone("gatekeeper-proxy-bench-", args.quick, run)


if __name__ == "__main__":
    sys.exit(main())

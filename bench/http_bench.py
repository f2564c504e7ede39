"""The HTTP benchmark (issue 13): an allowed call through Gatekeeper to a Streamable HTTP server, next to
direct HTTP calls to the same server, all in the same run, round-robin.

The server is tests/peers/vault_http_server.mjs (the TypeScript SDK 1.x, stateless: a fresh server and
transport per POST, SSE answers), installed by scripts/install_peers.py; the timed call is ``read_note`` of
a small note. Variants, all open at once:

- ``sdk direct``: the official ``mcp.Client`` over ``streamable_http_client(url)``;
- ``sdk gatekeeper``: the same client over stdio to ``python -m gatekeeper proxy --policy FILE`` whose
  policy fronts the server by ``url`` (``read_note: allow``);
- ``raw direct``: JSON-RPC POSTed with an ``httpx2.AsyncClient`` (one kept-alive connection);
- ``raw gatekeeper``: JSON-RPC lines written to the proxy's stdin, read from its stdout;
- ``raw sdk-path``: the same, to a proxy started with ``GATEKEEPER_FAST_PATH=0`` (every call the SDK
  way: what the fast path saves, in the same run).

Ratios are Gatekeeper's p50 (p99) ÷ direct's for the same client. A proxy that cannot front a ``url``
server yet (it lists no ``read_note`` or its call fails) gives a ``skipped: <reason>`` row, not a crash.

    .venv/bin/python bench/http_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from harness import FULL, QUICK, Figure, Report, log, make_home, p50, p99, print_table
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
VAULT_SERVER = REPO / "tests" / "peers" / "vault_http_server.mjs"
P50_RATIO = 1.2  # the target: an allowed call through Gatekeeper ≤ 1.2 × direct HTTP
PROTOCOL = "2025-11-25"
TOOL, ARGS = "read_note", {"path": "notes/small.md"}
HTTP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": PROTOCOL}
MAX_LINE = 1 << 24


@dataclass(frozen=True)
class Sizes:
    warmup: int
    calls: int


QUICK_SIZES, FULL_SIZES = Sizes(10, 40), Sizes(30, 300)

POLICY = """version: 1
servers:
  vault:
    url: {url}
    workspace: {vault}
    tools:
      read_note: allow
      search_notes: allow
      create_note:
        propose:
          path: {{template: "inbox/{{{{ args.title }}}}.md"}}
          content: {{arg: body}}
          globs: ["inbox/*.md"]
"""


@dataclass
class Skipped(Figure):
    """A row that could not be measured: shown as ``skipped: <reason>``, never a failure."""

    @property
    def shown(self) -> str:
        return f"skipped: {self.note.splitlines()[0][:70]}" if self.note else "skipped"


class Skip(Exception):
    """A variant cannot run here; the message is the row's reason."""


def ensure_ts_server_sdk() -> Path:
    """NODE_PATH for the vault server, through scripts/install_peers.py (the one installer of peers)."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import install_peers

        return install_peers.ensure_ts_server_sdk()
    except Exception as exc:  # no npm, no registry: a skipped row, not a crashed bench
        raise Skip(f"the TypeScript SDK server could not be installed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(REPO / "scripts"))


@contextmanager
def vault_server(vault: Path, logs: Path) -> Iterator[str]:
    """The vault server on a port it picks; yields its URL once it printed it (readline, no sleeps)."""
    env = {**os.environ, "NODE_PATH": str(ensure_ts_server_sdk()), "VAULT_JSON": "0"}
    env.pop("VAULT_TOKEN", None)
    with open(logs / "vault-http.stderr", "wb") as err:
        proc = subprocess.Popen(
            ["node", str(VAULT_SERVER), str(vault), "0"], stdout=subprocess.PIPE, stderr=err, env=env
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()  # "listening URL", or EOF when it failed
        if not line.startswith("listening "):
            raise RuntimeError(f"the vault server did not start: {(logs / 'vault-http.stderr').read_text()[-500:]}")
        yield line.split(" ", 1)[1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _answer(body: str, content_type: str) -> dict[str, Any]:
    """The JSON-RPC response in a JSON or an SSE body (the last ``data:`` line with an id)."""
    if content_type.startswith("application/json"):
        return dict(json.loads(body))
    for line in reversed(body.splitlines()):
        if line.startswith("data:"):
            msg = json.loads(line[5:])
            if "id" in msg:
                return dict(msg)
    raise RuntimeError(f"no JSON-RPC answer in the SSE body: {body[:200]!r}")


class RawHttp:
    """A raw Streamable HTTP JSON-RPC client: one POST per message on one kept-alive connection."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self.http, self.url, self.next_id = http, url, 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        response = await self.http.post(self.url, json=msg, headers=HTTP_HEADERS)
        response.raise_for_status()
        answer = _answer(response.text, response.headers.get("content-type", ""))
        if "error" in answer or answer.get("result", {}).get("isError"):
            raise RuntimeError(f"{method} failed: {answer}")
        return answer

    async def handshake(self) -> None:
        info = {"name": "raw-bench", "version": "1"}
        await self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": info})
        notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        (await self.http.post(self.url, json=notice, headers=HTTP_HEADERS)).raise_for_status()

    async def call(self) -> None:
        await self.request("tools/call", {"name": TOOL, "arguments": ARGS})


class RawStdio:
    """A raw JSON-RPC client of the proxy: lines to its stdin, lines from its stdout (notifications skipped)."""

    def __init__(self, proc: Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc, self.stdin = proc, proc.stdin
        self.stdout = BufferedByteReceiveStream(proc.stdout)
        self.next_id = 0

    async def send(self, msg: dict[str, Any]) -> None:
        await self.stdin.send(json.dumps(msg).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            answer = json.loads(await self.stdout.receive_until(b"\n", MAX_LINE))
            if answer.get("id") == self.next_id and "method" not in answer:
                if "error" in answer or answer.get("result", {}).get("isError"):
                    raise Skip(f"through Gatekeeper, {method} failed: {json.dumps(answer)[:300]}")
                return dict(answer)

    async def handshake(self) -> None:
        info = {"name": "raw-bench", "version": "1"}
        await self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": info})
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self) -> None:
        await self.request("tools/call", {"name": TOOL, "arguments": ARGS})


def _reason(exc: BaseException, errlog: Path) -> str:
    """The innermost error (task groups wrap it) and the proxy's last stderr line: why a variant is left out."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    lines = errlog.read_text(errors="replace").strip().splitlines() if errlog.exists() else []
    said = f" (the proxy's stderr ends: {lines[-1][:200]})" if lines else ""
    return f"{type(exc).__name__}: {exc}{said}"


def proxy_command(policy: Path) -> list[str]:
    return [PY, "-m", "gatekeeper", "proxy", "--policy", str(policy)]


def proxy_env(home: Path, fast: bool = True) -> dict[str, str]:
    env = {"GATEKEEPER_HOME": str(home), "PYTHONPATH": str(REPO), "GATEKEEPER_START_TIMEOUT": "20"}
    return env if fast else {**env, "GATEKEEPER_FAST_PATH": "0"}


@asynccontextmanager
async def gatekeeper_sdk(policy: Path, home: Path, errlog: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=PY, args=proxy_command(policy)[1:], env=proxy_env(home), cwd=str(policy.parent)
    )
    with open(errlog, "a", encoding="utf-8") as err:
        async with Client(stdio_client(params, errlog=err), mode="auto", cache=None) as client:
            yield client


@asynccontextmanager
async def gatekeeper_raw(policy: Path, home: Path, errlog: Path, fast: bool = True) -> AsyncIterator[RawStdio]:
    with open(errlog, "ab") as err:
        env = {**{k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}, **proxy_env(home, fast)}
        async with await anyio.open_process(proxy_command(policy), stderr=err, env=env, cwd=policy.parent) as proc:
            client = RawStdio(proc)
            try:
                yield client
            finally:
                await client.stdin.aclose()
                with anyio.move_on_after(5):
                    await proc.wait()
                if proc.returncode is None:
                    proc.kill()


def sdk_caller(client: Client, name: str) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        result = await client.call_tool(TOOL, ARGS)
        if result.is_error:
            raise Skip(f"{name}: {TOOL} answered an error: {str(result.content)[:300]}")

    return call


async def round_robin(calls: dict[str, Callable[[], Awaitable[None]]], reps: int) -> dict[str, list[float]]:
    """``reps`` rounds, one call per variant each, the order rotated each round; latencies in ms."""
    names = tuple(calls)
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(reps):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            start = time.perf_counter()
            await calls[name]()
            times[name].append((time.perf_counter() - start) * 1000)
    return times


async def measure(url: str, vault: Path, work: Path, sizes: Sizes) -> tuple[list[Figure], list[str]]:
    """Every variant open at once; Gatekeeper's are left out (with the reason) when its call fails."""
    policy = work / "policy.yaml"
    policy.write_text(POLICY.format(url=url, vault=vault))
    home = make_home(work / "home").path
    calls: dict[str, Callable[[], Awaitable[None]]] = {}
    skipped: list[Figure] = []
    notes: list[str] = [f"server: {url} (tests/peers/vault_http_server.mjs, stateless, SSE answers)"]
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
        raw = RawHttp(http, url)
        await raw.handshake()
        calls["raw direct"] = raw.call
        direct = await stack.enter_async_context(Client(streamable_http_client(url), mode="auto", cache=None))
        calls["sdk direct"] = sdk_caller(direct, "sdk direct")
        notes.append(f"sdk direct: protocol {direct.protocol_version}")
        try:
            gate = await stack.enter_async_context(gatekeeper_sdk(policy, home, work / "proxy-sdk.err"))
            listed = {t.name for t in (await gate.list_tools()).tools}
            if TOOL not in listed:
                raise Skip(f"the proxy lists no {TOOL} (tools: {sorted(listed)}); can it front `url` servers yet?")
            await sdk_caller(gate, "sdk gatekeeper")()
            calls["sdk gatekeeper"] = sdk_caller(gate, "sdk gatekeeper")
            gate_raw = await stack.enter_async_context(gatekeeper_raw(policy, home, work / "proxy-raw.err"))
            await gate_raw.handshake()
            await gate_raw.call()
            calls["raw gatekeeper"] = gate_raw.call
            slow = await stack.enter_async_context(gatekeeper_raw(policy, home, work / "proxy-slow.err", fast=False))
            await slow.handshake()
            await slow.call()
            calls["raw sdk-path"] = slow.call
        except Exception as exc:  # the proxy without url support (or broken): rows say why, direct ones still run
            reason = _reason(exc, work / "proxy-sdk.err")
            skipped.append(Skipped("H1. vault gatekeeper rows", 0.0, "", note=reason[:500]))
            calls.pop("sdk gatekeeper", None)
        log(f"[http] {len(calls)} variants: {sizes.warmup} warm-up + {sizes.calls} timed calls each, round-robin")
        await round_robin(calls, sizes.warmup)
        times = await round_robin(calls, sizes.calls)
    return [*latency_rows(times), *skipped], notes


def latency_rows(times: dict[str, list[float]]) -> list[Figure]:
    rows = []
    for client in ("sdk", "raw"):
        for variant in ("direct", "gatekeeper"):
            xs = times.get(f"{client} {variant}")
            if xs:
                rows.append(Figure(f"H1. vault {client} {variant} p50", p50(xs), "ms", None, "<"))
                rows.append(Figure(f"H1. vault {client} {variant} p99", p99(xs), "ms", None, "<"))
        gate, direct = times.get(f"{client} gatekeeper"), times.get(f"{client} direct")
        if gate and direct:
            rows.append(
                Figure(f"H1. vault {client} gatekeeper ratio p50", p50(gate) / p50(direct), "x", P50_RATIO, "<")
            )
            rows.append(Figure(f"H1. vault {client} gatekeeper ratio p99", p99(gate) / p99(direct), "x", None, "<"))
    slow, direct = times.get("raw sdk-path"), times.get("raw direct")
    if slow and direct:  # the proxy with its fast path off: what the fast path saves
        rows.append(Figure("H1. vault raw sdk-path p50", p50(slow), "ms", None, "<"))
        rows.append(Figure("H1. vault raw sdk-path ratio p50", p50(slow) / p50(direct), "x", None, "<"))
    return rows


def run_in(base: Path, sizes: Sizes) -> tuple[list[Figure], list[str]]:
    """All HTTP rows and their notes, built in ``base``."""
    vault = base / "vault"
    (vault / "notes").mkdir(parents=True)
    (vault / "notes" / "small.md").write_text("A small note, read over and over.\n" * 4)
    try:
        with vault_server(vault, base) as url:
            return anyio.run(measure, url, vault, base, sizes)
    except Skip as exc:
        return [Skipped("H1. vault rows", 0.0, "", note=str(exc))], []


def run(quick: bool, work: Path | None = None) -> list[Figure]:
    """The rows for bench/run.py's table, built in a fresh ``http-bench/`` of ``work`` (or a temp folder)."""
    sizes = QUICK_SIZES if quick else FULL_SIZES
    if work is not None:
        base = work / "http-bench"
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        return run_in(base, sizes)[0]
    with tempfile.TemporaryDirectory(prefix="gatekeeper-http-bench-") as tmp:
        return run_in(Path(tmp), sizes)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few calls: a smoke test")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="gatekeeper-http-bench-") as tmp:
            report = Report()
            rows, notes = run_in(Path(tmp), QUICK_SIZES if args.quick else FULL_SIZES)
            for figure in rows:
                report.add(figure)
            report.notes += notes
            print_table(report, QUICK if args.quick else FULL, Path(tmp), time.perf_counter() - start)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

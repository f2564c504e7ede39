"""What an allowed call to a ``url`` server costs through Gatekeeper, next to the same call made directly,
both with the cheapest client there is (issue 24 item 19; rows H2).

Two servers, each fronted by its own proxy, all four variants open at once and called round-robin:

- ``plain``: tests/peers/plain_http_server.mjs, node:http answering JSON with no MCP SDK (the floor);
- ``sdk``: tests/peers/vault_http_server.mjs, the TypeScript SDK 1.32.2's stateless Streamable HTTP
  server (a fresh server and transport per POST, SSE answers).

``direct`` is a raw HTTP client: one kept-alive socket, one POST per call in one send, the body read
to its end (Content-Length or chunked) and the head split by hand. ``gatekeeper`` is a raw line client
(bench/fastpath_setup.py's ``RawClient``) on the proxy's stdin/stdout (``python -m gatekeeper proxy``,
``read_note: allow``). No MCP SDK client on either side: its own cost per call (~1-2 ms) would hide
the proxy's. The call is ``read_note`` of a small note.
The proxy's CPU per call is its utime + stime (all threads, /proc) over the timed calls, divided by them.

    .venv/bin/python bench/urlcall_bench.py [--quick] [--calls N] [--baseline CHECKOUT]

``--baseline`` adds the proxy of another checkout (its ``gatekeeper`` package) in front of the same
servers, timed in the same rounds: before and after a change, on the same machine at the same moment.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastpath_setup import Launch, RawClient
from harness import FULL, QUICK, Figure, Report, log, make_home, p50, p99, print_table

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
PEERS = REPO / "tests" / "peers"
CACHE = Path(os.environ.get("GATEKEEPER_PEERS_CACHE", REPO / ".cache"))
P50_RATIO = 1.2
PROTOCOL = "2025-11-25"
TOOL, ARGS = "read_note", {"path": "notes/small.md"}
NOTE = "A small note, read over and over.\n" * 4
CLK_TCK = os.sysconf("SC_CLK_TCK")

POLICY = """version: 1
servers:
  vault:
    url: {url}
    workspace: {vault}
    tools:
      read_note: allow
      search_notes: allow
"""


@dataclass(frozen=True)
class Sizes:
    warmup: int
    calls: int


QUICK_SIZES, FULL_SIZES = Sizes(20, 60), Sizes(100, 1000)


class Unavailable(Exception):
    """A server cannot run here (no node, no installed SDK): its rows say why."""


@contextmanager
def server(name: str, argv: list[str], env: dict[str, str], logs: Path) -> Iterator[str]:
    """A server that prints ``listening URL`` on stdout once up; yields the URL, stops it after."""
    with open(logs / f"{name}.stderr", "wb") as err:
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env={**os.environ, **env})
        except OSError as exc:
            raise Unavailable(f"{name}: {exc}") from exc
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        if not line.startswith("listening "):
            raise Unavailable(f"{name} did not start: {(logs / f'{name}.stderr').read_text()[-300:]}")
        yield line.split(" ", 1)[1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def sdk_modules() -> Path:
    """NODE_PATH of the installed TypeScript SDK (scripts/install_peers.py), or ``Unavailable``."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import install_peers

        return Path(install_peers.ensure_ts_server_sdk())
    except Exception as exc:
        raise Unavailable(f"the TypeScript SDK server could not be installed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(REPO / "scripts"))


def answer_of(body: bytes, content_type: str) -> dict[str, Any]:
    """The JSON-RPC response in a JSON or an SSE body (the last ``data:`` line carrying an id)."""
    if content_type.startswith("application/json"):
        return dict(json.loads(body))
    for line in reversed(body.decode().splitlines()):
        if line.startswith("data:") and '"id"' in line:
            return dict(json.loads(line[5:]))
    raise RuntimeError(f"no JSON-RPC answer in the SSE body: {body[:200]!r}")


class RawHttp:
    """One kept-alive TCP connection and the least HTTP/1.1 there is: the request in one ``sendall``, the
    answer read to the end of its body (Content-Length or chunked), the head split by hand. ``http.client``
    would add ~0.1-0.2 ms of its own per call (its header parsing), which would hide as much of the proxy's."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.path, host, port = parts.path, parts.hostname or "127.0.0.1", parts.port or 80
        self.address = (host, port)
        self.sock = self._connect()
        self.head = (
            f"POST {self.path} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
            f"accept: application/json, text/event-stream\r\nmcp-protocol-version: {PROTOCOL}\r\n"
        )
        self.buf = b""
        self.next_id = 0

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=60)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _read(self) -> bytes:
        data = self.sock.recv(1 << 16)
        if not data:
            raise RuntimeError("the server closed the connection")
        return data

    def post(self, message: dict[str, Any]) -> tuple[int, bytes, str]:
        body = json.dumps(message).encode()
        request = f"{self.head}content-length: {len(body)}\r\n\r\n".encode() + body
        self.sock.sendall(request)
        try:
            self.buf += self._read()
        except (RuntimeError, ConnectionResetError):  # the server closed it while it was idle (Node: after 5 s)
            self.sock.close()
            self.sock = self._connect()
            self.sock.sendall(request)
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            self.buf += self._read()
        head, self.buf = self.buf[:end].decode("latin-1").lower().split("\r\n"), self.buf[end + 4 :]
        fields = dict(line.split(": ", 1) for line in head[1:])
        status = int(head[0].split(" ")[1])
        if "content-length" in fields:
            size = int(fields["content-length"])
            while len(self.buf) < size:
                self.buf += self._read()
            answer, self.buf = self.buf[:size], self.buf[size:]
        else:  # chunked: until the last chunk
            while (end := self.buf.find(b"\r\n0\r\n\r\n")) < 0 and not self.buf.startswith(b"0\r\n\r\n"):
                self.buf += self._read()
            cut = (end + 2, end + 7) if end >= 0 else (0, 5)
            answer, self.buf = _dechunk(self.buf[: cut[0]]), self.buf[cut[1] :]
        return status, answer, fields.get("content-type", "")

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        status, body, kind = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        answer = answer_of(body, kind)
        if status != 200 or "error" in answer or answer["result"].get("isError"):
            raise RuntimeError(f"{method} failed: HTTP {status} {answer}")
        return dict(answer["result"])

    def handshake(self) -> None:
        info = {"name": "urlcall-bench", "version": "1"}
        self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": info})
        status, _, _ = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert status == 202, status

    def call(self) -> None:
        self.request("tools/call", {"name": TOOL, "arguments": ARGS})

    def close(self) -> None:
        self.sock.close()


def _dechunk(data: bytes) -> bytes:
    out = []
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        out.append(rest[:size])
        data = rest[size + 2 :]
    return b"".join(out)


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid``, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proxy(policy: Path, home: Path, errlog: Any, code: Path = REPO) -> RawClient:
    """``python -m gatekeeper proxy`` of the checkout ``code``, past its handshake and a first call."""
    env = {"GATEKEEPER_HOME": str(home), "PYTHONPATH": str(code), "GATEKEEPER_START_TIMEOUT": "20"}
    argv = [PY, "-m", "gatekeeper", "proxy", "--policy", str(policy)]
    client = RawClient(Launch(argv, env, str(policy.parent)), errlog)
    client.handshake()
    client.call(TOOL, ARGS)
    return client


def round_robin(calls: dict[str, Callable[[], None]], reps: int) -> dict[str, list[float]]:
    """``reps`` rounds, one call per variant each, the order rotated every round; latencies in ms."""
    names = tuple(calls)
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(reps):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            start = time.perf_counter()
            calls[name]()
            times[name].append((time.perf_counter() - start) * 1000)
    return times


def rows_of(times: dict[str, list[float]], cpu: dict[str, float], calls: int) -> list[Figure]:
    rows = []
    for kind in ("plain", "sdk"):
        direct = times.get(f"{kind} direct")
        for variant in ("gatekeeper", "baseline"):
            gate = times.get(f"{kind} {variant}")
            if not (direct and gate):
                continue
            if variant == "gatekeeper":
                rows.append(Figure(f"H2. {kind} raw direct p50", p50(direct), "ms", None, "<"))
            target = P50_RATIO if variant == "gatekeeper" else None
            rows.append(Figure(f"H2. {kind} raw {variant} p50", p50(gate), "ms", None, "<"))
            rows.append(Figure(f"H2. {kind} {variant} ratio p50", p50(gate) / p50(direct), "x", target, "<"))
            rows.append(Figure(f"H2. {kind} {variant} ratio p99", p99(gate) / p99(direct), "x", None, "<"))
            used = cpu[f"{kind} {variant}"] * 1000 / calls
            rows.append(Figure(f"H2. {kind} {variant} proxy CPU per call", used, "ms", None, "<"))
    return rows


def servers(vault: Path) -> tuple[dict[str, tuple[list[str], dict[str, str]]], list[Figure]]:
    """How to start each server, and a skipped row for one that cannot run here."""
    launches = {"plain": (["node", str(PEERS / "plain_http_server.mjs"), str(vault), "0"], dict[str, str]())}
    try:
        launches["sdk"] = (["node", str(PEERS / "vault_http_server.mjs"), str(vault), "0"], sdk_env())
    except Unavailable as exc:
        return launches, [Figure("H2. sdk rows", 0.0, "", note=str(exc))]
    return launches, []


def measure(base: Path, sizes: Sizes, baseline: Path | None = None) -> tuple[list[Figure], list[str]]:
    """Every variant open at once (``baseline``: also that checkout's proxy), then timed round-robin."""
    vault = base / "vault"
    (vault / "notes").mkdir(parents=True, exist_ok=True)
    (vault / "notes" / "small.md").write_text(NOTE)
    calls: dict[str, Callable[[], None]] = {}
    proxies: dict[str, RawClient] = {}
    launches, skipped = servers(vault)
    codes = {"gatekeeper": REPO, **({"baseline": baseline} if baseline else {})}
    with ExitStack() as stack:
        errlog = stack.enter_context(open(base / "proxy.stderr", "w"))
        for kind, (argv, env) in launches.items():
            try:
                url = stack.enter_context(server(kind, argv, env, base))
            except Unavailable as exc:
                skipped.append(Figure(f"H2. {kind} rows", 0.0, "", note=str(exc)))
                continue
            direct = RawHttp(url)
            stack.callback(direct.close)
            direct.handshake()
            calls[f"{kind} direct"] = direct.call
            policy = base / f"policy-{kind}.yaml"
            policy.write_text(POLICY.format(url=url, vault=vault))
            for variant, code in codes.items():
                home = make_home(base / f"home-{kind}-{variant}").path  # its own pins: the servers' tools differ
                gate = proxies[f"{kind} {variant}"] = proxy(policy, home, errlog, code)
                stack.callback(gate.close)
                calls[f"{kind} {variant}"] = lambda gate=gate: gate.call(TOOL, ARGS)  # type: ignore[misc]
        log(f"[urlcall] {len(calls)} variants: {sizes.warmup} warm-up + {sizes.calls} timed calls each, round-robin")
        round_robin(calls, sizes.warmup)
        before = {name: cpu_seconds(p.proc.pid) for name, p in proxies.items()}
        times = round_robin(calls, sizes.calls)
        cpu = {name: cpu_seconds(p.proc.pid) - before[name] for name, p in proxies.items()}
    notes = [f"H2: {sizes.calls} timed calls per variant, interleaved; direct: a raw socket client, gatekeeper: lines"]
    if baseline:
        notes.append(f"H2 baseline: the proxy of {baseline}, same servers, same run")
    return [*rows_of(times, cpu, sizes.calls), *skipped], notes


def sdk_env() -> dict[str, str]:
    return {"NODE_PATH": str(sdk_modules()), "VAULT_JSON": "0"}


def run(quick: bool, work: Path | None = None) -> list[Figure]:
    """The rows for bench/run.py's table, built in a fresh ``urlcall-bench/`` of ``work`` (or a temp folder)."""
    sizes = QUICK_SIZES if quick else FULL_SIZES
    if work is not None:
        base = work / "urlcall-bench"
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        return measure(base, sizes)[0]
    with tempfile.TemporaryDirectory(prefix="gatekeeper-urlcall-") as tmp:
        return measure(Path(tmp), sizes)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few calls: a smoke test")
    parser.add_argument("--calls", type=int, help="timed calls per variant (default 1000; --quick 60)")
    parser.add_argument("--baseline", type=Path, help="also the proxy of this checkout (e.g. main), same run")
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    if args.calls:
        sizes = Sizes(sizes.warmup, args.calls)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gatekeeper-urlcall-") as tmp:
        report = Report()
        rows, notes = measure(Path(tmp), sizes, args.baseline)
        for figure in rows:
            report.add(figure)
        report.notes += notes
        print_table(report, QUICK if args.quick else FULL, Path(tmp), time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())

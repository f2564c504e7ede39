"""The fast-path benchmark's parts: the variants and servers it launches, the peers it installs
(FastMCP in its own venv, the filesystem server), and the raw JSON-RPC client. ``fastpath_bench``
runs them; see its docstring."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from harness import Figure, log

REPO = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
PY = sys.executable
CACHE = Path(os.environ.get("GATEKEEPER_PEERS_CACHE", REPO / ".cache"))
FASTMCP_PACKAGE = "fastmcp==4.2.3"
FASTMCP_VENV = CACHE / "fastmcp-venv"
PROTOCOL = "2025-11-25"  # the filesystem server speaks only this one

P50_RATIO, P99_RATIO, COLD_MARGIN_S, RSS_MIB, IMPORT_S = 1.2, 1.3, 0.3, 50.0, 0.3
VARIANTS = (
    "direct",
    "gatekeeper",
    "gatekeeper-asyncio",
    "gatekeeper-legacy",
    "gatekeeper-auto",
    "relay-poll",
    "relay-selectors",
    "relay-asyncio",
    "relay-uvloop",
    "relay-uvloop-protocol",
    "fastmcp",
)

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
out, sys.argv[0] = sys.argv.pop(1), "gatekeeper"
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
    only: tuple[str, ...] = ()  # ``--only``: these variants (and direct), else all
    baseline: Path | None = None  # ``--baseline DIR``: also the proxy of another checkout, same run


def launch(variant: str, server: Server, setup: Setup) -> Launch:
    """The command line of ``variant`` in front of ``server``."""
    if variant == "direct":
        return Launch(server.argv, server.env)
    if variant == "gatekeeper" or variant.startswith("gatekeeper-"):
        policy = setup.work / f"policy-{server.key}.yaml"
        policy.write_text("version: 1\nservers:\n" + server.policy)
        code = setup.baseline if variant == "gatekeeper-baseline" and setup.baseline else REPO
        env = {"GATEKEEPER_HOME": str(setup.home), "PYTHONPATH": str(code), "GATEKEEPER_START_TIMEOUT": "20"}
        extra = variant.removeprefix("gatekeeper").removeprefix("-")  # "", baseline, a downstream mode, a loop
        mode = ["--downstream-mode", extra] if extra in ("legacy", "auto") else []  # else the default: match
        args = ["-m", "gatekeeper", "proxy", "--policy", str(policy), *mode]
        if extra not in ("", "baseline", "legacy", "auto"):
            env["GATEKEEPER_LOOP"] = extra
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
    opt_in = {"gatekeeper-legacy", "gatekeeper-auto"} - set(setup.only)  # diagnostic variants: only when named
    names = [v for v in VARIANTS if v not in opt_in and (v != "fastmcp" or isinstance(setup.fastmcp, Path))]
    if setup.baseline is not None:
        names.insert(names.index("gatekeeper") + 1, "gatekeeper-baseline")
    return tuple(n for n in names if not setup.only or n == "direct" or n in setup.only)


def rss_mib(pid: int) -> float:
    """Resident memory of one process (not its children), MiB, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process (not its children), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


# -- the raw JSON-RPC client -----------------------------------------------------------------------


ANSWER_WITHIN = 60.0  # seconds: a variant that stops answering is killed, so the bench fails instead of hanging


class RawClient:
    """Lines to the process's stdin, lines from its stdout: the least a client can do per call.

    A blocking readline has no timeout, and a per-call timer would be measured with the call; a
    watchdog thread that reads one deadline every half second costs the call only two float stores.
    """

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
        self.deadline = 0.0  # 0: not waiting for an answer
        self.timed_out = False
        threading.Thread(target=self._watch, name="raw-client-watchdog", daemon=True).start()

    def _watch(self) -> None:
        while self.proc.poll() is None:
            time.sleep(0.5)
            if self.deadline and time.monotonic() > self.deadline:
                self.timed_out = True
                self.proc.kill()  # its stdout closes: the blocked readline returns b""

    def send(self, message: dict[str, Any]) -> None:
        self.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        self.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and read until its answer (server requests get -32601, notifications skipped)."""
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        self.deadline = time.monotonic() + ANSWER_WITHIN
        try:
            return self._answer(method)
        finally:
            self.deadline = 0.0

    def _answer(self, method: str) -> dict[str, Any]:
        while True:
            line = self.stdout.readline()
            if not line:
                if self.timed_out:
                    raise RuntimeError(f"{method}: no answer within {ANSWER_WITHIN:.0f} s; the process was killed")
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

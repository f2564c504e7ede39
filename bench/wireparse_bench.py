"""What one host line costs to parse: the lean parse (proxy/host/parse.py: orjson and a shape check)
against today's (proxy/host/oracle.py: the SDK's pydantic models), interleaved in one run (issue 12, step 3).

Per line kind, rounds alternate which parser goes first; each round parses the same line ``--lines``
times with each and the table shows the median over rounds of µs per line, with the min-max spread.
Also each parser's import time in a fresh interpreter (median of 5), which the lean one avoids paying
at start-up. Standalone (not part of ``make bench``):

    .venv/bin/python bench/wireparse_bench.py [--rounds 15] [--lines 2000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from gatekeeper.proxy.host import oracle as wire
from gatekeeper.proxy.host import parse as wireparse

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
    "io.modelcontextprotocol/logLevel": "info",
}


def _call(arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> bytes:
    params: dict[str, Any] = {"name": "notes__read_note", "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return json.dumps({"jsonrpc": "2.0", "id": 1234, "method": "tools/call", "params": params}).encode()


LINES = {
    "tools/call, 2025 (typical)": _call({"path": "notes/hello.md"}, {"progressToken": 7}),
    "tools/call, 2026 envelope": _call({"path": "notes/hello.md"}, ENVELOPE),
    "tools/call, 10 KB argument": _call({"path": "notes/x.md", "body": "a" * 10_000}),
    "response (roots/list)": b'{"jsonrpc":"2.0","id":"r1","result":{"roots":[{"uri":"file:///w","name":"w"}]}}',
}


def per_line(parse: Callable[[bytes], Any], line: bytes, n: int) -> float:
    """µs per line over ``n`` parses of ``line``."""
    start = time.perf_counter()
    for _ in range(n):
        parse(line)
    return (time.perf_counter() - start) / n * 1e6


def import_seconds(module: str) -> float:
    """Median wall time of importing ``module`` in a fresh interpreter (the interpreter's own start excluded)."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    runs = [float(subprocess.check_output([sys.executable, "-c", code], text=True)) for _ in range(5)]
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--lines", type=int, default=2000)
    args = parser.parse_args()
    parsers: dict[str, Callable[[bytes], Any]] = {"lean": wireparse.parse, "wire": wire.parse}
    print(f"{'line':30} {'bytes':>7} {'lean µs':>18} {'wire µs':>18} {'wire/lean':>9}")
    for label, line in LINES.items():
        assert wireparse.quick(line) is not None, label  # the lean parse takes it itself
        times: dict[str, list[float]] = {name: [] for name in parsers}
        for round_no in range(args.rounds):
            order = list(parsers) if round_no % 2 == 0 else list(reversed(parsers))
            for name in order:
                times[name].append(per_line(parsers[name], line, args.lines))
        cells = {name: statistics.median(values) for name, values in times.items()}
        spread = {name: f"{cells[name]:7.2f} [{min(v):.1f}-{max(v):.1f}]" for name, v in times.items()}
        ratio = cells["wire"] / cells["lean"]
        print(f"{label:30} {len(line):7,} {spread['lean']:>18} {spread['wire']:>18} {ratio:8.1f}x")
    lean_import = import_seconds("gatekeeper.proxy.host.parse")
    wire_import = import_seconds("gatekeeper.proxy.host.oracle")
    print(f"import: wireparse {lean_import * 1000:.0f} ms, wire {wire_import * 1000:.0f} ms (median of 5)")


if __name__ == "__main__":
    main()

"""Instructions the proxy executes per fast call, under callgrind: a count the machine's load
does not move (issue 12; CPU time on a shared 2-core machine spreads ±20% between identical runs).

The proxy (this checkout, or ``--baseline DIR``'s) runs under ``valgrind --tool=callgrind`` with
instrumentation off; after the handshake and a warm-up it is switched on (``callgrind_control``)
for ``--calls`` raw calls, then dumped: the total over the calls, divided by their number.

    .venv/bin/python bench/percall_instr.py [--baseline DIR] [--calls 500] [--only notes,fs] [--keep DIR]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from fastpath_setup import Launch, RawClient, Server, Setup, ensure_filesystem, filesystem, launch, notes
from harness import make_home

KEEP: Path | None = None


def count(setup: Setup, key: str, variant: str, calls: int) -> float:
    """Instructions per call of one proxy (its own process, not its child)."""
    server = notes(setup.work) if key == "notes" else filesystem(setup.work, Path(str(ensure_filesystem())))
    spec = launch(variant, server, setup)
    out = setup.work / f"callgrind-{key}-{variant}.out"
    grind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", "-q"]
    env = {**spec.env, "GATEKEEPER_START_TIMEOUT": "120"}
    with open(setup.work / f"{key}.err", "a", encoding="utf-8") as err:
        client = RawClient(Launch([*grind, *spec.argv], env, spec.cwd), err)
        try:
            client.handshake()
            for _ in range(50):
                client.call(server.tool, server.args)
            pid = str(client.proc.pid)
            toggle(client, server, pid, "on")  # the calls meanwhile are (mostly) not counted
            for _ in range(calls):
                client.call(server.tool, server.args)
            calls += toggle(client, server, pid, "off")  # the calls meanwhile (mostly) are
        finally:
            client.close()
    total = 0
    for dump in setup.work.glob(f"callgrind-{key}-{variant}.out*"):
        # the file's own summary line says 0 when instrumentation starts late: callgrind_annotate sums
        shown = subprocess.run(["callgrind_annotate", str(dump)], capture_output=True, text=True, check=True)
        match = re.search(r"^\s*([\d,]+)\s.*PROGRAM TOTALS", shown.stdout, re.M)
        total += int(match.group(1).replace(",", "")) if match else 0
        if KEEP is not None:  # ``--keep DIR``: for callgrind_annotate
            dump.replace(KEEP / dump.name)
        else:
            dump.unlink()
    return total / calls


def toggle(client: RawClient, server: Server, pid: str, state: str) -> int:
    """Switch instrumentation; how many calls it took. Valgrind reads the command only while the
    process runs, never while it sleeps in epoll, so calls go on until the command is answered."""
    quiet = subprocess.DEVNULL
    command = subprocess.Popen(["callgrind_control", "-i", state, pid], stdout=quiet, stderr=quiet)
    made = 0
    while command.poll() is None:
        client.call(server.tool, server.args)
        made += 1
    if command.returncode != 0:
        raise RuntimeError(f"callgrind_control -i {state} {pid} failed ({command.returncode})")
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another checkout's proxy as gatekeeper-baseline")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--only", default="notes,fs", help="servers: notes, fs")
    parser.add_argument("--keep", type=Path, help="keep the callgrind dumps in this directory")
    args = parser.parse_args()
    global KEEP
    KEEP = args.keep
    with tempfile.TemporaryDirectory(prefix="gatekeeper-instr-") as tmp:
        work = Path(tmp)
        setup = Setup(work, make_home(work / "home").path, "not used", baseline=args.baseline)
        for key in args.only.split(","):
            ours = count(setup, key, "gatekeeper", args.calls)
            line = f"{key}: gatekeeper {ours:,.0f} instructions per call"
            if args.baseline is not None:
                base = count(setup, key, "gatekeeper-baseline", args.calls)
                line += f"; baseline {base:,.0f}; ratio {ours / base:.3f}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

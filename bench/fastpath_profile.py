"""The fast-path bench's profile: raw calls through the Gatekeeper proxy under cProfile, and what
its main thread does per call (``--profile``). Beside fastpath_setup.py, which stays under 400 lines."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from fastpath_setup import RawClient, Server, Setup, launch

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
        lines.append(buf.getvalue())
    return lines

"""The test harness's switches, read from the environment when a committer starts. Never set them in use.

They exist because random kill timing almost never hits the narrow windows that matter (see the
shared notes): the crash campaign needs to stop the committer at a named step, to pause it while
a test swaps a folder, to make an fsync fail, and to run deliberately broken variants that the
campaign must catch. A committer that sees any of them says so on stderr.

``GATEKEEPER_CRASH_AT=point:n[,point:n]``  ``os._exit(137)`` on the nth pass through ``point``.
``GATEKEEPER_PAUSE_AT=point:n:PREFIX``  on the nth pass create ``PREFIX.paused``, wait for ``PREFIX.resume``.
``GATEKEEPER_PLANT_BUG=separate_event``  the outcome's audit event in its own transaction, after the row.
``GATEKEEPER_PLANT_BUG=in_place``  write with ``O_CREAT|O_EXCL`` under the final name instead of O_TMPFILE.
``GATEKEEPER_PLANT_BUG=change_in_place``  a change rewrites the file in place (``O_TRUNC``) instead of swapping.
  (The bugs live in ``planted.py``; each replaces one named step, see ``Switches.step``; only this
  module installs them, so the committer's own modules never import them.)
``GATEKEEPER_INJECT=fsync_eio:file|dir``  that kind of fsync fails with EIO (once per process).
``GATEKEEPER_NO_OPENAT2=1``, ``GATEKEEPER_NO_TMPFILE=1``  force the fallbacks (O_NOFOLLOW walk; renameat2).
``GATEKEEPER_COMMIT_NO_LOCK=1``  skip the one-committer lock (the design must be safe without it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from gatekeeper.commit import planted
from gatekeeper.commit.switches import CRASH_POINTS, Switches
from gatekeeper.errors import InvalidInput

PLANTED_BUGS = tuple(planted.BUGS)
INJECTIONS = ("fsync_eio:file", "fsync_eio:dir")
ENV_VARS = (
    "GATEKEEPER_CRASH_AT",
    "GATEKEEPER_PAUSE_AT",
    "GATEKEEPER_PLANT_BUG",
    "GATEKEEPER_INJECT",
    "GATEKEEPER_NO_OPENAT2",
    "GATEKEEPER_NO_TMPFILE",
    "GATEKEEPER_COMMIT_NO_LOCK",
)


def _bad(var: str, value: str, why: str) -> InvalidInput:
    return InvalidInput(f"{var}={value!r}: {why}", "this is a test-only switch; unset it to run normally")


def _point_count(var: str, value: str, text: str) -> tuple[str, int]:
    name, _, count = text.partition(":")
    if name not in CRASH_POINTS:
        raise _bad(var, value, f"unknown point {name!r}; known: {', '.join(CRASH_POINTS)}")
    if not count.isdigit() or int(count) < 1:
        raise _bad(var, value, "expected point:n with n >= 1")
    return name, int(count)


def from_env(env: Mapping[str, str] | None = None) -> Switches:
    """The switches the environment asks for (none: ``Switches()``, all off); a typo is refused."""
    env = os.environ if env is None else env
    sw = Switches(active=tuple(f"{v}={env[v]}" for v in ENV_VARS if env.get(v)))
    if raw := env.get("GATEKEEPER_CRASH_AT", ""):
        sw.crash = dict(_point_count("GATEKEEPER_CRASH_AT", raw, part) for part in raw.split(","))
    if raw := env.get("GATEKEEPER_PAUSE_AT", ""):
        spec, sep, prefix = raw.rpartition(":")
        if not sep or not prefix:
            raise _bad("GATEKEEPER_PAUSE_AT", raw, "expected point:n:PREFIX")
        name, count = _point_count("GATEKEEPER_PAUSE_AT", raw, spec)
        sw.pause = {name: (count, prefix)}
    if raw := env.get("GATEKEEPER_PLANT_BUG", ""):
        if raw not in planted.BUGS:
            raise _bad("GATEKEEPER_PLANT_BUG", raw, f"known bugs: {', '.join(planted.BUGS)}")
        sw.bug = raw
        step, function = planted.BUGS[raw]
        sw.replaced = {step: function}
    if raw := env.get("GATEKEEPER_INJECT", ""):
        if raw not in INJECTIONS:
            raise _bad("GATEKEEPER_INJECT", raw, f"known: {', '.join(INJECTIONS)}")
        sw.inject = raw
    sw.no_openat2 = env.get("GATEKEEPER_NO_OPENAT2", "") not in ("", "0")
    sw.no_tmpfile = env.get("GATEKEEPER_NO_TMPFILE", "") not in ("", "0")
    sw.no_lock = env.get("GATEKEEPER_COMMIT_NO_LOCK", "") not in ("", "0")
    return sw

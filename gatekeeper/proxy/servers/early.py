"""Downstream servers spawned before the proxy's heavy imports, held until a ``Downstream`` adopts them.

Importing the policy models and the MCP SDK takes most of the proxy's start-up; a child's own
start (node, uv) takes about as long. So ``gatekeeper proxy`` starts each child first, from the
plain-data read of the policy (policy/launch.py), exactly as proxy/servers/stdio/process.py would: the same argv,
environment, cwd, the user's umask, its own session, stderr appended to ``<home>/logs/<name>.log``
after the usual start marker. Until the event loop installs its own signal handlers, a SIGTERM,
SIGINT or SIGHUP ends these children's process groups and the proxy. Any start-up failure
(``discard``) kills whatever was not adopted, so an error leaves no server behind.

Stdlib only: this runs before anything heavy is imported.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path
from types import FrameType

from gatekeeper.home import user_umask
from gatekeeper.policy.launch import Launch

MARK = "--- gatekeeper:"  # the start marker proxy/servers/downstream.py writes (and strips from stderr tails)
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_KILL_REAP = 0.5

_held: dict[str, tuple[Launch, subprocess.Popen[bytes]]] = {}
_previous: dict[int, object] = {}  # the handlers ours replaced, put back by ``discard``
_adopted: list[subprocess.Popen[bytes]] = []  # still ours to end on a signal until the loop's handlers run


def spawn(launches: list[Launch], log_dir: Path, mode: str) -> None:
    """Start every server now; on any failure start none (the normal path will, and explain)."""
    try:
        log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        _install_signals()
        for launch in launches:
            _held[launch.name] = (launch, _start(launch, log_dir, mode))
    except Exception:
        discard()


def _start(launch: Launch, log_dir: Path, mode: str) -> subprocess.Popen[bytes]:
    with open(log_dir / f"{launch.name}.log", "a", encoding="utf-8", errors="replace") as errlog:
        errlog.write(f"{MARK} starting {launch.name} ({mode}): {launch.given} {' '.join(launch.args)}\n")
        errlog.flush()
        return subprocess.Popen(  # as proxy/servers/stdio/process.py runs it
            launch.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            env=launch.environment(),
            cwd=launch.cwd,
            start_new_session=True,
            umask=user_umask(),
        )


def adopt(name: str, argv: list[str], env: dict[str, str], cwd: Path | str | None) -> subprocess.Popen[bytes] | None:
    """The early child for ``name`` if it was started exactly so and is still running (once only)."""
    held = _held.pop(name, None)
    if held is None:
        return None
    launch, process = held
    same = launch.argv == argv and launch.environment() == env and str(launch.cwd) == str(cwd)
    if not same or process.poll() is not None:
        kill(process)  # the policy read differently after all, or it died: start it the normal way
        return None
    _adopted.append(process)
    return process


def discard() -> None:
    """At the end of ``gatekeeper proxy``, whatever the outcome: no early child outlives it.

    Kills every early child still running (start-up failed, or its session never took it), and
    puts back the signal handlers ours replaced (for in-process callers; a process just exits).
    """
    while _held:
        _, (_, process) = _held.popitem()
        kill(process)
    while _adopted:  # ended by proxy/servers/stdio/process.py's ``stop``; one the session never reached is ended here
        process = _adopted.pop()
        if process.poll() is None:
            kill(process)
    while _previous:
        sig, handler = _previous.popitem()
        if signal.getsignal(sig) is _on_signal:
            signal.signal(sig, handler)  # type: ignore[arg-type]


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's whole group and reap it: it has done nothing yet worth a grace."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # the child leads its own group (start_new_session)
    with suppress(subprocess.TimeoutExpired):
        process.wait(_KILL_REAP)
    for pipe in (process.stdin, process.stdout):
        with suppress(OSError):
            if pipe is not None:
                pipe.close()


def _install_signals() -> None:
    for sig in _SIGNALS:
        handler = signal.getsignal(sig)
        if handler in (signal.SIG_DFL, signal.default_int_handler):
            _previous[sig] = handler
            signal.signal(sig, _on_signal)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """Before the event loop's handlers: end the early children, then exit as a signal would."""
    for process in [*_adopted, *(p for _, p in _held.values())]:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 0.4
    while time.monotonic() < deadline and any(p.poll() is None for _, p in _held.values()):
        time.sleep(0.01)
    for process in _adopted:
        kill(process)
    discard()
    sys.stderr.flush()
    os._exit(128 + signum)

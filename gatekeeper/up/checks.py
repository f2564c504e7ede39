"""Can ``gatekeeper up`` start here? One ``up`` per home, no other committer on it, its port free.

Each check fails with ``StartFailed``: one line saying what stands in the way and how to clear it,
before a child is started or a log-in link printed. The children say the same thing if a race
gets past these (``supervise`` reports a child that ends before it said it was running), but a
child's message cannot know the port option or the other ``up``'s pid.
"""

from __future__ import annotations

import errno
import fcntl
import http.client
import json
import os
import socket
import ssl
from pathlib import Path

from gatekeeper import humane
from gatekeeper.canonical import now_ts
from gatekeeper.errors import GatekeeperError
from gatekeeper.home import Home

UP_LOCK = "up.lock"
_LOOPBACKS = ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1"))  # where localhost may lead a browser


class StartFailed(GatekeeperError):
    """``up`` could not start; the message is the whole story (problem, then the fix), on one line."""

    exit_code = 1


class UpLock:
    """``flock`` on ``<home>/up.lock``, held while ``up`` runs; the pid inside names it to a second
    ``up``. The kernel drops it however ``up`` ends, and the file (never deleted) is not inherited
    by the children (close-on-exec)."""

    def __init__(self, home: Home) -> None:
        self.path = home.path / UP_LOCK
        self.fd = -1

    def acquire(self) -> None:
        if self.fd >= 0:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = holder_of(fd)
            os.close(fd)
            pid = holder.get("pid", "?")
            raise StartFailed(
                f"another `gatekeeper up` is running on this home ({self.path.parent}): pid {pid}{_since(holder)}. "
                f"Stop it first (Ctrl-C where it runs, or `kill {pid}`), or leave it: it already serves the "
                "review page and commits"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps({"pid": os.getpid(), "started_at": now_ts()}) + "\n").encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def holder_of(fd: int) -> dict[str, object]:
    """What a lock's holder wrote in it (pid, start time); empty when not readable yet."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _since(holder: dict[str, object]) -> str:
    try:
        return f", started {humane.ago(str(holder['started_at']))}"
    except (KeyError, ValueError):
        return ""


def check_no_committer(home: Home, port: int) -> None:
    """A committer already on this home (``gatekeeper commit --watch`` run by hand) would make ours
    stop at once; say whose it is instead. Probes the lock and lets go of it at once."""
    from gatekeeper.commit.lock import CommitLock, CommitterBusy

    probe = CommitLock(home.lock_path)
    try:
        probe.acquire()
    except CommitterBusy as busy:
        try:
            pid = json.loads(home.lock_path.read_text()).get("pid")
        except (OSError, ValueError, AttributeError):
            pid = None
        stop = f"`kill {pid}`" if pid is not None and f"pid {pid} " in busy.message else "stop it"
        raise StartFailed(
            f"{busy.message}. Stop it first ({stop}), or leave it committing and serve only the review page: "
            f"`gatekeeper review --port {port}`"
        ) from None
    probe.release()


def check_port(port: int) -> None:
    """The review page's port must be free at 127.0.0.1 (where it listens) and at ::1 (where a
    browser may take ``localhost``): else the log-in link would lead to another program."""
    problem = _port_problem(port)
    if problem is None:
        return
    if problem == "permission":
        raise StartFailed(
            f"cannot listen on port {port}: this user may not use ports below 1024. Start with another port: "
            "`gatekeeper up --port 8765`"
        )
    other = next((p for p in range(port + 1, min(port + 50, 65536)) if _port_problem(p) is None), None)
    try_other = f"`gatekeeper up --port {other}` ({other} is free)" if other else "`gatekeeper up --port N`"
    raise StartFailed(
        f"port {port} is in use by another program ({problem}), so the review page cannot listen there. "
        f"Start it on another port: {try_other}, or stop what listens on {port}"
    )


def _port_problem(port: int) -> str | None:
    for family, host in _LOOPBACKS:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the page's server will
                sock.bind((host, port))
        except PermissionError:
            return "permission"
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"at {host}"
            # no IPv6 on this machine (EADDRNOTAVAIL, EAFNOSUPPORT): nothing can be there either
    return None


def page_answers(port: int, *, tls: bool) -> bool:
    """Does the review page answer HTTP at 127.0.0.1:port (any status: it is there)?"""
    conn: http.client.HTTPConnection
    if tls:  # our own child on loopback, with a certificate for its public name: no check to make
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/login")
        conn.getresponse().read()
        return True
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def log_reason(path: Path, start: int) -> str:
    """The last error a child wrote to its log since ``start`` (its own ``Error: …`` line and the
    fix under it, or uvicorn's ``ERROR: …``), as one line; else its last line."""
    try:
        with path.open("rb") as log:
            log.seek(start)
            text = log.read()[-8000:].decode("utf-8", errors="replace")
    except OSError:
        return "(its log is not readable)"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "(it wrote nothing)"
    errors = [i for i, line in enumerate(lines) if line.lower().startswith("error:")]
    if not errors:
        return lines[-1]
    first = errors[-1]
    said = [lines[first].split(":", 1)[1].strip()]
    said += [line.removeprefix("→").strip() for line in lines[first + 1 :] if line.startswith("→")]
    return " → ".join(said)

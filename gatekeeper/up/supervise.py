"""``gatekeeper up``: the review page and the committer as two supervised child processes.

They stay separate processes (each with its own privileges in the design); this only starts
them, waits until each says it is running (``gatekeeper.up.ready``) and the page answers, restarts
one that dies after that (with backoff, and says so), stops both on Ctrl-C, and prints a line
when a proposal arrives, is decided and is committed, by following the audit log. A child that
ends before it was running is not restarted: ``up`` stops with its reason (``StartFailed``).
Both children use the database ``up`` resolved (a team's PostgreSQL URL is handed to them in
``GATEKEEPER_DATABASE_URL``), and a database server that goes away is said once, not a crash.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from gatekeeper.home import Home
from gatekeeper.store import events as ev
from gatekeeper.store.backends import DatabaseUnreachable, Outage
from gatekeeper.store.follow import Follower
from gatekeeper.store.target import ENV_DATABASE_URL, PostgresUrl, as_url
from gatekeeper.store.values import DONE_OUTCOMES
from gatekeeper.up.checks import StartFailed, log_reason
from gatekeeper.up.ready import ENV_READY_FD, ReadyPipe

BACKOFF_FIRST, BACKOFF_MAX = 1.0, 30.0
SLOW_START = 20.0  # seconds before ``up`` says it is still waiting for a child (it keeps waiting)


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] | None = None  # None: this process's environment
    answers: Callable[[], bool] | None = None  # after it says it runs: is it really there (the page answers)?
    fix: str = ""  # what to try when it could not start, beyond what it said itself
    proc: subprocess.Popen[bytes] | None = None
    running: bool = False  # said it runs (and answers) since its last start
    pipe: ReadyPipe | None = field(default=None, repr=False)
    log_start: int = 0  # the log's size at the last start: what this run wrote comes after
    restarts: int = 0
    next_start: float = 0.0
    started_at: float = 0.0
    log: object = field(default=None, repr=False)

    def start(self) -> None:
        self.log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self.log = os.fdopen(fd, "ab")  # closed in stop()
        self.log_start = os.fstat(fd).st_size
        self.pipe, self.running = ReadyPipe(), False
        env = {**(os.environ if self.env is None else self.env), ENV_READY_FD: str(self.pipe.fd)}
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, env=env, pass_fds=(self.pipe.fd,)
        )
        self.pipe.handed_over()
        self.started_at = time.monotonic()

    def is_running(self) -> bool:
        """Has it said it runs (and, for the page, does it answer)? Asked until it has."""
        if not self.running and self.pipe is not None and self.pipe.said():
            self.running = self.answers is None or self.answers()
        return self.running

    def why_not(self, code: int) -> str:
        """Why it ended before it ran, in one line, from what it wrote to its log this time."""
        fix = f"; {self.fix}" if self.fix else ""
        return f"the {self.name} could not start (exit {code}): {log_reason(self.log_path, self.log_start)}{fix}"

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log is not None:
            self.log.close()  # type: ignore[attr-defined]
            self.log = None
        if self.pipe is not None:
            self.pipe.close()

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_bytes()[-4000:].decode("utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])


def describe(kind: str, pid: str | None, payload: dict[str, object]) -> str | None:
    if kind == ev.PROPOSAL_CREATED:
        where = f"{payload.get('server')}/{payload.get('tool')} → {payload.get('path')}"
        return f"proposal  {pid}  {where} ({payload.get('size')} bytes)"
    if kind == ev.DECISION:
        why = f": {payload['reason']}" if payload.get("reason") else ""
        return f"{payload.get('verdict'):<9} {pid}  by {payload.get('reviewer')}{why}"
    if kind == ev.COMMIT_OUTCOME:
        outcome = payload.get("outcome")
        written = outcome in DONE_OUTCOMES
        target = payload.get("final_path") if written else payload.get("detail")
        if outcome in ("applied", "deleted"):
            target = f"{target} ({'changed' if outcome == 'applied' else 'deleted'})"
        return f"{'committed' if written else payload.get('outcome'):<9} {pid}  {target}"
    return None


def supervise(
    home: Home,
    children: list[Child],
    *,
    say: Callable[[str], None],
    ready: Callable[[], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> int:
    """Start the children, call ``ready`` once every one runs, then tend them until Ctrl-C/SIGTERM;
    returns the exit status. A child that ends before it ran raises ``StartFailed`` (the others
    are stopped first)."""
    stopping = {"now": False}

    def on_signal(signum: int, _frame: object) -> None:
        stopping["now"] = True

    def stop_now() -> bool:
        return stopping["now"] or should_stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    env = child_env(home)  # the children open the very database this process resolved
    for child in children:
        child.env = env if child.env is None else child.env
    reader = home.reader()
    feed = Follower(reader)  # from the current head: only what happens while up
    news = _News(feed, say)
    try:
        if start_all(children, stop_now, say) and ready is not None:
            ready()
        while not stop_now():
            for child in children:
                tend(child, time.monotonic(), say)
            news.tell()
            time.sleep(0.2)
        say("stopping…")
        return 0
    finally:
        for child in children:
            child.stop()
        feed.close()
        reader.close()
        for s, handler in previous.items():
            signal.signal(s, handler)


def start_all(children: list[Child], stop_now: Callable[[], bool], say: Callable[[str], None]) -> bool:
    """Start every child and wait, however long a loaded machine takes, until each says it runs;
    False when told to stop first. One that ends before it ran is ``StartFailed``, with its reason."""
    for child in children:
        child.start()
    since, told = time.monotonic(), False
    while not all([child.is_running() for child in children]):  # a list: ask every one each round
        if stop_now():
            return False
        for child in children:
            assert child.proc is not None
            code = child.proc.poll()
            if code is not None and not child.is_running():
                raise StartFailed(child.why_not(code))
        if not told and time.monotonic() - since > SLOW_START:
            waiting = [f"the {c.name} (log {c.log_path})" for c in children if not c.running]
            say(f"still starting: waiting for {' and '.join(waiting)}. Ctrl-C stops.")
            told = True
        time.sleep(0.1)
    return True


def tend(child: Child, now: float, say: Callable[[str], None]) -> None:
    """Restart a child that died after it ran (with backoff, said), or start it when its delay is up."""
    if child.proc is None:
        if now >= child.next_start:
            child.start()
            say(f"restarted {child.name} (restart #{child.restarts})")
        return
    code = child.proc.poll()
    if code is None:
        if now - child.started_at > 60:
            child.restarts = 0  # up for a minute: the next crash starts the backoff afresh
        return
    child.restarts += 1
    delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (child.restarts - 1))
    say(f"{child.name} stopped (exit {code}); restarting in {delay:g} s. Last lines of {child.log_path}:")
    for line in child.tail().splitlines():
        say(f"    {line}")
    child.stop()
    child.proc = None
    child.next_start = now + delay


class _News:
    """The feed's new events, one line each; a database server that went away is said once (and
    its return), and the feed carries on from where it was."""

    def __init__(self, feed: Follower, say: Callable[[str], None]) -> None:
        self.feed, self.say = feed, say
        self.outage = Outage(say, "the feed resumes when it answers")

    def tell(self) -> None:
        try:
            rows = self.feed.poll()
        except DatabaseUnreachable as exc:
            self.outage.lost(exc)
            return
        self.outage.back()
        for row in rows:
            said = describe(row[2], row[4], json.loads(row[5]))
            if said:
                self.say(said)


def child_argv(home: Home, *args: str) -> list[str]:
    return [sys.executable, "-m", "gatekeeper", "--home", str(home.path), *args]


def child_env(home: Home) -> dict[str, str] | None:
    """The children's environment: ours, plus the PostgreSQL URL ``up`` resolved (from the
    environment or the home's ``database_url`` file), so both open the very same database. None
    (inherit ours) for SQLite."""
    database = home.database
    if not isinstance(database, PostgresUrl):
        return None
    return {**os.environ, ENV_DATABASE_URL: as_url(database)}


_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0")


def review_port(review_url: str) -> int | None:
    """The port ``gatekeeper up`` must listen on for the policy's ``review_url``.

    None when the URL names another machine (a reverse proxy in front): then its port says
    nothing about ours.
    """
    parts = urlsplit(review_url)
    host = (parts.hostname or "").lower()
    if not (host in _LOCAL_HOSTS or host.startswith("127.")):
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return port or (443 if parts.scheme == "https" else 80)


def port_mismatch(review_url: str, port: int, policy_display: str) -> str | None:
    """Why agents would be handed a dead link, and what to do; None when the two agree."""
    wanted = review_port(review_url)
    if wanted is None or wanted == port:
        return None
    return (
        f"{policy_display} sends agents to review_url {review_url} (port {wanted}), but the review page "
        f"listens on port {port}: every link agents are given would be dead. Run `gatekeeper up --port {wanted}`, "
        f"or change review_url in {policy_display} to http://localhost:{port}"
    )

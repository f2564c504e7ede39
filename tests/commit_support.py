"""Committer test support: a world (home, workspace, policy, an outside folder), a runner that
starts real committer processes, and the invariant checker the crash campaign uses.

The runner forks committers from a ``forkserver`` that has the committer's modules imported
already: each is a real process (killable with SIGKILL, exiting through ``os._exit``), running
the same click entry point as ``gatekeeper commit``, but without ~0.7 s of imports per start,
which is what lets the suite afford hundreds of kills. ``real=True`` runs
``python -m gatekeeper commit`` instead, the way a person would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import itertools
import json
import multiprocessing as mp
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import wait as mp_wait
from pathlib import Path
from typing import Any

from gatekeeper.audit.verify import verify_chain
from gatekeeper.home import URL_NAME, Home
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.store.target import PostgresUrl
from tests import pg_support
from tests.helpers import PROOF, add_reviewer, draft, make_home, patience

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
TEST_ENV_VARS = (
    "GATEKEEPER_CRASH_AT",
    "GATEKEEPER_PAUSE_AT",
    "GATEKEEPER_PLANT_BUG",
    "GATEKEEPER_INJECT",
    "GATEKEEPER_NO_OPENAT2",
    "GATEKEEPER_NO_TMPFILE",
    "GATEKEEPER_COMMIT_NO_LOCK",
)

POLICY = """version: 1
servers:
  notes:
    command: python
    workspace: {workspace}
    tools:
      create_note:
        propose:
          path: {{arg: path}}
          content: {{arg: body}}
          globs: {globs}
          file_mode: "{mode}"
          max_bytes: 1048576
      replace_note:
        propose: {{mode: replace, path: {{arg: path}}, content: {{arg: body}}, globs: {globs}, max_bytes: 1048576}}
      append_note:
        propose: {{mode: append, path: {{arg: path}}, content: {{arg: body}}, globs: {globs}, max_bytes: 1048576}}
      edit_note:
        propose: {{mode: edit, path: {{arg: path}}, globs: {globs}, max_bytes: 1048576}}
      delete_note:
        propose: {{mode: delete, path: {{arg: path}}, globs: {globs}, max_bytes: 1048576}}
      replace_or_create:
        propose: {{mode: replace, create_if_missing: true, path: {{arg: path}}, content: {{arg: body}}, globs: {globs}}}
      replace_private:
        propose: {{mode: replace, path: {{arg: path}}, content: {{arg: body}}, globs: {globs}, file_mode: "0600"}}
"""
TOOLS = {"create": "create_note", "replace": "replace_note", "append": "append_note", "edit": "edit_note"}
TOOLS["delete"] = "delete_note"
GLOBS = ["notes/**", "deep/**", "same/**", "evil/**", "small/**", "ro/**", "imm/**", "bulk/**", "chg/**"]


# -- the world ----------------------------------------------------------------------------------


@dataclass
class World:
    root: Path
    home: Home
    workspace: Path
    outside: Path
    policy: Path
    mode: str = "0644"

    @property
    def key(self) -> bytes:
        return self.home.read_key()

    def store(self) -> Store:
        return Store(self.home.database, keys_dir=self.home.keys.folder)

    def write_policy(
        self, globs: list[str] | None = None, mode: str | None = None, workspace: Path | None = None
    ) -> None:
        self.mode = mode or self.mode
        text = POLICY.format(workspace=workspace or self.workspace, globs=globs or GLOBS, mode=self.mode)
        self.policy.write_text(text)

    def propose(
        self,
        path: str,
        content: bytes,
        *,
        verdict: str | None = "approved",
        store: Store | None = None,
        mode: str = "create",
        base: bytes | None = None,
        tool: str | None = None,
    ) -> str:
        """A proposal through the store's domain API, decided (or not) by reviewer alice.

        A change (``mode`` replace/append/edit/delete) needs its ``base``, the bytes read at the
        destination; ``content`` is then the whole resulting file (empty for delete)."""
        own = store is None
        s = store or self.store()
        try:
            d = dataclasses.replace(
                draft(path, content, arguments={"path": path, "n": os.urandom(4).hex()}, tool=tool or TOOLS[mode]),
                workspace=str(self.workspace),
                workspace_real=os.path.realpath(self.workspace),  # as the proxy records it
                mode=mode,
                base=base,
            )
            pid = s.propose(d).id
            if verdict is not None:
                self.decide(pid, verdict, store=s)
            return pid
        finally:
            if own:
                s.close()

    def decide(self, pid: str, verdict: str = "approved", *, store: Store | None = None) -> None:
        own = store is None
        s = store or self.store()
        try:
            ((sha, path, mode, base_sha),) = self.db_rows(
                "SELECT sha256, path, mode, base_sha256 FROM proposal WHERE id = ?", pid
            )
            reason = "no, thanks" if verdict == "rejected" else None
            s.decide(
                pid, verdict=verdict, reviewer="alice", sha256=sha, path=path, reason=reason,
                mode=mode, base_sha256=base_sha, proof=PROOF,
            )  # fmt: skip
        finally:
            if own:
                s.close()

    def forge_approval(self, path: str, content: bytes) -> str:
        """A proposal 'approved' by a decision row that Gatekeeper's review never signed."""
        pid = self.propose(path, content, verdict=None)
        conn = pg_support.connect_now(self.home.database)
        try:
            sha = conn.execute("SELECT sha256 FROM proposal WHERE id = ?", (pid,)).fetchone()[0]
            conn.execute(
                "INSERT INTO decision (proposal_id, verdict, reviewer, reason, sha256, path, decided_at, signature) "
                "VALUES (?, 'approved', 'alice', NULL, ?, ?, '2026-01-01T00:00:00.000000Z', ?)",
                (pid, sha, path, "0" * 64),
            )
            conn.commit()
        finally:
            conn.close()
        return pid

    def db_rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        db = self.home.database
        conn = pg_support.connect_now(db) if isinstance(db, PostgresUrl) else _sqlite_ro(db)
        try:
            return [tuple(row) for row in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    def outcome(self, pid: str) -> tuple[str, str, str | None] | None:
        rows = self.db_rows("SELECT outcome, detail, final_path FROM commit_record WHERE proposal_id = ?", pid)
        return rows[0] if rows else None


def _sqlite_ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)


_MIGRATE = threading.Lock()  # Alembic's `op` and context are process-global: one migration at a time


def make_world(root: Path, database: PostgresUrl | None = None, *, keys_from: Home | None = None) -> World:
    """A world on SQLite (``gatekeeper.db`` in its home), or on ``database`` (the home's
    ``database_url`` names it). ``keys_from``: a second machine on the same database, holding only
    the public keys of that home (which decides); the reviewer exists already."""
    root.mkdir(parents=True, exist_ok=True)
    home_path = root / "home"
    if database is not None:
        home_path.mkdir(mode=0o700)
        (home_path / URL_NAME).write_text(database.url + "\n")
    if keys_from is not None:
        Home(home_path).keys.import_public(keys_from.keys.export_public())
    with _MIGRATE:
        home = make_home(home_path)
    if keys_from is None:
        with Store(home.database, keys_dir=home.keys.folder) as s:
            add_reviewer(s)
    world = World(root, home, root / "workspace", root / "outside", root / "policy.yaml")
    world.workspace.mkdir()
    world.outside.mkdir()
    world.write_policy()
    return world


# -- running committers -------------------------------------------------------------------------


@dataclass
class Run:
    code: int | None
    out: str
    err: str
    seconds: float

    @property
    def killed(self) -> bool:
        return self.code in (137, -signal.SIGKILL)


def _child_main(argv: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """Runs in a forked process: the same entry point as `python -m gatekeeper commit`."""
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    from gatekeeper.cli import cli

    cli.main(args=argv, prog_name="gatekeeper")


_CTX: Any = None
# multiprocessing is not thread-safe here: Process.start() polls every other child's exit status
# (process._cleanup), and two threads reading one status pipe make one of them see EOF (exit 255).
_MP_LOCK = threading.Lock()
_WARM = "GATEKEEPER_TEST_FORKSERVER_WARM"


def _warm_up() -> None:
    """In the fork server only: run one committer in-process, so that the lazy first-use work
    (SQLAlchemy's dialect and generated code, regex and pydantic caches) is done once, not in
    every forked child."""
    import shutil
    import tempfile

    from gatekeeper.cli import cli

    root = Path(tempfile.mkdtemp(prefix="gk-warm-"))
    saved = dict(os.environ)
    try:
        world = make_world(root / "w")
        world.propose("notes/warm.md", b"warm\n")
        os.environ["GATEKEEPER_HOME"] = str(world.home.path)
        sink = io.StringIO()
        for args in (["--once"], ["--once", "--json"]):
            with contextlib.suppress(SystemExit), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                cli.main(args=["commit", *args, "--policy", str(world.policy)], prog_name="gatekeeper")
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(root, ignore_errors=True)


_CTX_LOCK = threading.Lock()


def _forkserver() -> Any:
    global _CTX
    with _CTX_LOCK:
        if _CTX is None:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(["gatekeeper.cli", "tests.commit_support"])
            os.environ[_WARM] = "1"  # the server inherits it when it starts, just below
            try:
                p = ctx.Process(target=time.sleep, args=(0,))
                p.start()
                p.join()
            finally:
                del os.environ[_WARM]
            _CTX = ctx
    return _CTX


def commit_env(world: World, **switches: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in TEST_ENV_VARS and k != "GATEKEEPER_POLICY"}
    env["GATEKEEPER_HOME"] = str(world.home.path)
    env["PYTHONPATH"] = str(REPO)
    env.update(switches)
    return env


class Committer:
    """One committer process, started now; ``wait`` or ``kill`` it."""

    _n = itertools.count()

    def __init__(self, world: World, args: list[str], env: dict[str, str], *, real: bool = False) -> None:
        tag = f"{os.getpid()}-{next(Committer._n)}"
        self.out_path, self.err_path = world.root / f"out-{tag}.txt", world.root / f"err-{tag}.txt"
        argv = ["commit", *args, "--policy", str(world.policy)]
        self.started = time.perf_counter()
        self.real = real
        if real:
            # The child gets its own copies of the descriptors; the parent's close at once.
            with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
                self.proc: Any = subprocess.Popen(
                    [PY, "-m", "gatekeeper", *argv], env=env, cwd=world.root, stdout=out, stderr=err
                )
        else:
            self.proc = _forkserver().Process(
                target=_child_main, args=(argv, env, str(world.root), str(self.out_path), str(self.err_path))
            )
            with _MP_LOCK:
                self.proc.start()

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def kill(self) -> None:
        self.proc.kill()

    def terminate(self) -> None:
        self.proc.terminate()

    def wait(self, timeout: float = 60) -> Run:
        if self.real:
            try:
                code = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait()
        else:
            if not mp_wait([self.proc.sentinel], timeout):
                self.proc.kill()
                mp_wait([self.proc.sentinel])
            with _MP_LOCK:
                self.proc.join()
            code = self.proc.exitcode
        seconds = time.perf_counter() - self.started
        out, err = _read_and_remove(self.out_path), _read_and_remove(self.err_path)
        return Run(code, out, err, seconds)


def _read_and_remove(path: Path) -> str:
    """A child killed before it redirected its output leaves no file."""
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
    finally:
        path.unlink(missing_ok=True)


def run_commit(
    world: World,
    *args: str,
    kill_after: float | None = None,
    real: bool = False,
    timeout: float = 60,
    **switches: str,
) -> Run:
    c = Committer(world, list(args) or ["--once"], commit_env(world, **switches), real=real)
    if kill_after is not None:
        time.sleep(kill_after)  # a random moment to kill at: the thing under test, not a wait
        c.kill()
    return c.wait(timeout)


def wait_for(predicate: Any, timeout: float = 10, interval: float = 0.002) -> bool:
    """True once ``predicate`` holds; False if it still does not after ``helpers.patience(timeout)`` s."""
    deadline = time.monotonic() + patience(timeout)
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


# -- what is on disk ----------------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry beneath ``root`` without following links: dir / file bytes and mode / link target."""
    out: dict[str, tuple[Any, ...]] = {}

    def walk(folder: Path, rel: str) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            out[rel or "."] = ("unreadable", exc.errno)
            return
        for e in entries:
            path = f"{rel}/{e.name}" if rel else e.name
            st = e.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                out[path] = ("link", os.readlink(e.path))
            elif stat.S_ISDIR(st.st_mode):
                out[path] = ("dir",)
                walk(Path(e.path), path)
            elif stat.S_ISREG(st.st_mode):
                out[path] = ("file", Path(e.path).read_bytes(), stat.S_IMODE(st.st_mode))
            else:
                out[path] = ("other", stat.S_IFMT(st.st_mode))

    walk(root, "")
    return out


# -- a hostile little workspace for the crash campaign -------------------------------------------

CREATED, CONFLICT, REFUSED = frozenset({"created"}), frozenset({"conflict"}), frozenset({"refused"})
APPLIED, DELETED = frozenset({"applied"}), frozenset({"deleted"})
CHANGE_MODE = 0o640  # pre-existing files' own mode, which a change keeps (the change rules set none)


def change_of(mode: str, base: bytes, rng: Any) -> bytes:
    """The result of a change of ``mode`` over ``base``, as the proxy would compute it."""
    addition = b"\n-- appended " + rng.randbytes(rng.choice([1, 40, 5000])).hex().encode() + b"\n"
    if mode == "append":
        return base + addition
    if mode == "edit":
        return base.replace(base[:1], b"#", 1) if base else b"#"
    if mode == "delete":
        return b""
    return rng.randbytes(rng.choice([0, 1, 100, 4096, 70_000]))


def build_scenario(
    root: Path, rng: Any, *, fresh: int = 8, late: int = 6, database: PostgresUrl | None = None
) -> Scenario:
    """Approved proposals of every kind (new files, nested folders, identical and different files
    already there, symlinks, a file where a folder goes, refusals), plus pending and rejected ones."""
    w = make_world(root, database)
    sc = Scenario(w)
    ws, out = w.workspace, w.outside
    (ws / "notes").mkdir()
    (ws / "notes" / "pre-same.md").write_bytes(b"same bytes\n")
    (ws / "notes" / "pre-diff.md").write_bytes(b"someone else's file\n")
    (out / "target.md").write_bytes(b"outside, must never change\n")
    (ws / "notes" / "link.md").symlink_to(out / "target.md")
    (ws / "notes" / "dangling.md").symlink_to(out / "nothing-here.md")
    (ws / "evil").symlink_to(out)
    (ws / "notes" / "plain").write_bytes(b"a file, not a folder\n")
    (ws / "notes" / "folder.md").mkdir()

    def body(i: int) -> bytes:
        size = rng.choice([0, 1, 100, 4096, 70_000, 300_000])
        return (f"{i}:".encode() + rng.randbytes(size))[: max(size, 1)]

    with w.store() as s:
        changes_first = rng.random() < 0.5  # the committer works oldest first: put either kind first
        if changes_first:
            add_changes(sc, s, rng)
        plan: list[tuple[str, bytes, frozenset[str]]] = []
        for i in range(fresh):
            plan.append((f"notes/n{i}.md", body(i), CREATED))
        plan += [
            (f"deep/d{rng.randrange(1000)}/x/y.md", body(90), CREATED),
            ("notes/pre-same.md", b"same bytes\n", CREATED),
            ("notes/pre-diff.md", b"my version\n", CONFLICT),
            ("notes/link.md", b"through the link?\n", CONFLICT),
            ("notes/dangling.md", b"through the dangling link?\n", CONFLICT),
            ("evil/escape.md", b"outside?\n", CONFLICT),
            ("notes/plain/x.md", b"under a file?\n", CONFLICT),
            ("notes/folder.md", b"over a folder?\n", CONFLICT),
            ("other/not-allowed.md", b"policy says no\n", REFUSED),
            ("same/p.md", b"first\n", CREATED),
            ("same/p.md", b"second, different\n", CONFLICT),
            ("same/q.md", b"twin\n", CREATED),
            ("same/q.md", b"twin\n", CREATED),
        ]
        for path, content, outcomes in plan:
            sc.approved[w.propose(path, content, store=s)] = Expect(path, content, outcomes)
        if not changes_first:
            add_changes(sc, s, rng)
        for path, verdict in (("notes/pending.md", None), ("notes/rejected.md", "rejected")):
            sc.unapproved[w.propose(path, b"not approved\n", verdict=verdict, store=s)] = path
        for i in range(late):
            path, content = f"notes/late{i}.md", body(100 + i)
            pid = w.propose(path, content, verdict=None, store=s)
            sc.unapproved[pid] = path
            sc.late.append(pid)
            sc.late_content[pid] = (path, content)
    forged = w.forge_approval("notes/forged.md", b"forged\n")
    sc.approved[forged] = Expect("notes/forged.md", b"forged\n", REFUSED)
    sc.freeze()
    return sc


def add_changes(sc: Scenario, s: Store, rng: Any) -> None:
    """Approved changes of every mode over files already there (applied or deleted), changes whose
    file someone else rewrote after the proposal (conflicts: their bytes must stay), and changes
    over a symlink, a folder, a FIFO and a missing file (conflicts)."""
    w, ws = sc.world, sc.world.workspace
    (ws / "chg").mkdir()
    for mode in ("replace", "append", "edit", "delete"):
        for i in range(rng.randint(1, 3)):
            path = f"chg/{mode}{i}.md"
            base = rng.randbytes(rng.choice([1, 100, 4096, 200_000])) if i else b"line\n" * 3
            (ws / path).write_bytes(base)
            os.chmod(ws / path, CHANGE_MODE)
            result = change_of(mode, base, rng)
            pid = w.propose(path, result, mode=mode, base=base, store=s)
            sc.approved[pid] = Expect(path, result, DELETED if mode == "delete" else APPLIED, mode, base)
        path = f"chg/theirs-{mode}.md"
        (ws / path).write_bytes(b"base\n")
        pid = w.propose(path, change_of(mode, b"base\n", rng), mode=mode, base=b"base\n", store=s)
        (ws / path).write_bytes(b"someone else's newer version\n")
        sc.approved[pid] = Expect(path, b"", CONFLICT, mode, b"base\n")
    (ws / "chg" / "dir.md").mkdir()
    os.mkfifo(ws / "chg" / "fifo.md")
    (ws / "chg" / "link.md").symlink_to(w.outside / "target.md")
    for name in ("dir.md", "fifo.md", "link.md", "missing.md"):
        mode = rng.choice(["replace", "append", "edit", "delete"])
        pid = w.propose(f"chg/{name}", change_of(mode, b"x\n", rng), mode=mode, base=b"x\n", store=s)
        sc.approved[pid] = Expect(f"chg/{name}", b"", CONFLICT, mode, b"x\n")


# -- the invariants -----------------------------------------------------------------------------


@dataclass
class Expect:
    path: str
    content: bytes
    outcomes: frozenset[str]
    mode: str = "create"
    base: bytes | None = None

    @property
    def changes_disk(self) -> bool:
        """A change expected to go through: its file may hold the base or the result (never else)."""
        return self.mode != "create" and bool(self.outcomes & {"applied", "deleted"})


@dataclass
class Scenario:
    world: World
    approved: dict[str, Expect] = field(default_factory=dict)
    unapproved: dict[str, str] = field(default_factory=dict)  # pid -> path, pending or rejected
    late: list[str] = field(default_factory=list)  # pending now, approved during the campaign
    before: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    outside_before: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    root_before: set[str] = field(default_factory=set)
    late_content: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    allow_tmp: bool = False  # the renameat2 fallback may leave hidden temporary names after a kill

    def freeze(self) -> None:
        self.before = snapshot(self.world.workspace)
        self.outside_before = snapshot(self.world.outside)
        self.root_before = {p.name for p in self.world.root.iterdir()}

    def approve_late(self) -> bool:
        if not self.late:
            return False
        pid = self.late.pop(0)
        self.world.decide(pid)
        path, content = self.late_content.pop(pid)
        self.unapproved.pop(pid)
        self.approved[pid] = Expect(path, content, frozenset({"created"}))
        return True


def check(sc: Scenario, *, final: bool) -> list[str]:
    """Every invariant of issue 5; an empty list means all hold."""
    w, problems = sc.world, []
    records: dict[str, list[tuple[Any, ...]]] = {}
    for pid, outcome, observed, final_path in w.db_rows(
        "SELECT proposal_id, outcome, observed_sha256, final_path FROM commit_record"
    ):
        records.setdefault(pid, []).append((outcome, observed, final_path))
    kinds: Counter[tuple[str, str]] = Counter(
        (pid, kind)
        for pid, kind in w.db_rows(
            "SELECT proposal_id, kind FROM audit_event WHERE kind IN ('commit_intent', 'commit_outcome')"
        )
    )
    for pid, exp in sc.approved.items():
        recs, intents, outcome_events = (
            records.get(pid, []),
            kinds[(pid, "commit_intent")],
            kinds[(pid, "commit_outcome")],
        )
        if len(recs) > 1:
            problems.append(f"{exp.path}: {len(recs)} outcomes recorded")
        if outcome_events != len(recs):
            problems.append(f"{exp.path}: {len(recs)} outcome row(s) but {outcome_events} outcome event(s)")
        if intents > 1:
            problems.append(f"{exp.path}: {intents} intent events")
        if not recs:
            if final:
                problems.append(f"{exp.path}: approved but no outcome after a clean run")
            continue
        outcome, observed, final_path = recs[0]
        if outcome not in exp.outcomes:
            problems.append(f"{exp.path}: outcome {outcome!r}, expected one of {sorted(exp.outcomes)}")
        if outcome in ("created", "applied", "deleted", "conflict") and intents != 1:
            problems.append(f"{exp.path}: outcome {outcome} without exactly one intent ({intents})")
        if outcome == "created":
            target = w.workspace / exp.path
            if final_path != str(target):
                problems.append(f"{exp.path}: final_path {final_path!r}, expected {str(target)!r}")
            try:
                st = os.lstat(target)
                data = target.read_bytes() if stat.S_ISREG(st.st_mode) else None
            except OSError as exc:
                problems.append(f"{exp.path}: recorded created but cannot be read: {exc}")
                continue
            if data != exp.content:
                problems.append(f"{exp.path}: recorded created but the bytes on disk differ from the approved bytes")
        if outcome == "applied":
            data = _bytes_at(w.workspace / exp.path)
            if data != exp.content:
                problems.append(f"{exp.path}: recorded applied but the file holds {_which(exp, data)}")
        if outcome == "deleted" and os.path.lexists(w.workspace / exp.path):
            problems.append(f"{exp.path}: recorded deleted but it is still there")
    problems += _check_bases(sc)
    for pid, path in sc.unapproved.items():
        if records.get(pid) or kinds[(pid, "commit_intent")] or kinds[(pid, "commit_outcome")]:
            problems.append(f"{path}: unapproved proposal was touched by the committer")
    problems += _check_disk(sc)
    with Reader(w.home.database) as reader:
        chain = verify_chain(reader)
    if not chain.ok:
        problems.append(f"audit chain broken: {chain.problem}")
    problems += [f"{sc.approved[p].path if p in sc.approved else p}: held back ({why})" for p, why in held_back(w)]
    return problems


def held_back(w: World) -> list[tuple[str, str]]:
    """Proposals the committer's journal refused (``commit/held.py``): never right without tampering."""
    try:
        lines = (w.home.path / "commit-journal").read_text().splitlines()
    except FileNotFoundError:
        return []
    items = [json.loads(line) for line in lines if line.startswith("{") and line.endswith("}")]
    return [(i["proposal"], i.get("why", "")) for i in items if i.get("step") == "refused"]


def _bytes_at(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if stat.S_ISREG(os.lstat(path).st_mode) else None
    except OSError:
        return None


def _which(exp: Expect, data: bytes | None) -> str:
    if data is None:
        return "nothing (missing or not a file)"
    if data == exp.base:
        return "the base bytes"
    if data == exp.content:
        return "the approved result"
    if exp.mode == "append" and exp.base is not None and data.startswith(exp.content):
        return "the addition twice (an append applied twice)"
    return f"other bytes ({len(data)} bytes: a torn or foreign file)"


def _check_bases(sc: Scenario) -> list[str]:
    """Every change's base bytes are in the store, byte for byte, with their digest."""
    problems = []
    changes = {pid: exp for pid, exp in sc.approved.items() if exp.mode != "create"}
    for pid, base, base_sha in sc.world.db_rows(
        f"SELECT id, base, base_sha256 FROM proposal WHERE id IN ({','.join('?' * len(changes))})", *changes
    ):
        exp = changes[pid]
        if base is None or bytes(base) != exp.base or hashlib.sha256(bytes(base)).hexdigest() != base_sha:
            problems.append(f"{exp.path}: the base bytes in the store are not the file's bytes before the change")
    return problems


def _check_disk(sc: Scenario) -> list[str]:
    w, problems = sc.world, []
    now = snapshot(w.workspace)
    changing = {exp.path: exp for exp in sc.approved.values() if exp.changes_disk}
    for path, exp in changing.items():
        entry = now.get(path)
        if exp.mode == "delete" and entry is None:
            continue
        if entry is None or entry[0] != "file" or entry[1] not in (exp.base, exp.content):
            problems.append(f"{path}: the file being changed holds {_which(exp, entry[1] if entry else None)}")
        elif entry[2] != CHANGE_MODE:
            problems.append(f"{path}: mode {entry[2]:o}, the file's own was {CHANGE_MODE:o}")
    temps = {f"{exp.path.rsplit('/', 1)[0]}/.gatekeeper-{pid}.new": exp for pid, exp in sc.approved.items()}
    for path, entry in sorted(now.items()):
        if "/.gatekeeper-" not in path or not path.endswith(".new"):
            continue
        exp = temps.get(path)
        if exp is None:
            problems.append(f"{path}: a temporary name no approved change uses")
        elif entry[0] != "file" or (entry[1] not in (exp.base, exp.content) and not sc.allow_tmp):
            problems.append(f"{path}: a temporary name holding neither the base nor the result")
        del now[path]  # an interrupted or finished attempt's evidence: base or result bytes, swept later
    for path, entry in sc.before.items():
        if path in changing:
            continue
        if now.get(path) != entry:
            problems.append(f"pre-existing {path!r} changed: {entry[:1]} -> {now.get(path, ('missing',))[:1]}")
    wanted: dict[str, set[bytes]] = {}
    folders: set[str] = set()
    for exp in sc.approved.values():
        wanted.setdefault(exp.path, set()).add(exp.content)
        parts = exp.path.split("/")
        folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
    for path in sorted(set(now) - set(sc.before)):
        entry = now[path]
        if entry[0] == "dir" and path in folders:
            continue
        if sc.allow_tmp and entry[0] == "file" and path.rsplit("/", 1)[-1].startswith(".gatekeeper-tmp-"):
            continue
        if entry[0] == "file" and entry[1] in wanted.get(path, ()):
            if entry[2] != int(w.mode, 8):
                problems.append(f"{path}: mode {entry[2]:o}, the rule says {w.mode}")
            continue
        what = "a partial or foreign file" if entry[0] == "file" else f"an unexpected {entry[0]}"
        problems.append(f"{path}: {what} under a final name (size {len(entry[1]) if entry[0] == 'file' else '-'})")
    if snapshot(w.outside) != sc.outside_before:
        problems.append("something changed outside the workspace")
    extra = {p.name for p in w.root.iterdir()} - sc.root_before
    extra = {n for n in extra if not n.startswith(("out-", "err-"))}
    if extra:
        problems.append(f"new entries beside the workspace: {sorted(extra)}")
    return problems


if os.environ.get(_WARM) == "1" and mp.current_process().name == "MainProcess":
    _warm_up()

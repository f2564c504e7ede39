"""PostgreSQL for the tests: install it (Debian's package) and run throwaway clusters.

A cluster lives in a temporary folder: data, log, and its Unix socket (no TCP port, so parallel
runs never clash). PostgreSQL refuses to run as root, so as root every server command runs as
the ``postgres`` user through ``runuser``; as anyone else, as that user. See
shared/notes/postgres.md.

``python scripts/postgres.py`` (``make postgres``) installs it when missing. Under CI=true a
failure to get it exits 1 (the PostgreSQL half of the store suite must not turn into skips);
elsewhere it warns and exits 0, and the tests say why they skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PORT = 55432  # names the socket file only: listen_addresses='' opens no TCP port
USER = "gk"  # the cluster's superuser (initdb -U), trusted on the socket


class PostgresUnavailable(Exception):
    """PostgreSQL is not installed and could not be; the message says how to get it."""


def find_bindir() -> Path | None:
    """The newest /usr/lib/postgresql/N/bin holding initdb, or the folder of an initdb on PATH."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def install() -> Path:
    """The server's bin folder, installing Debian's ``postgresql`` package first when missing."""
    bindir = find_bindir()
    if bindir is not None:
        return bindir
    if os.geteuid() != 0:
        raise PostgresUnavailable("PostgreSQL is not installed: `sudo apt-get install postgresql` installs it")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "postgresql"]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PostgresUnavailable(f"`{' '.join(cmd)}` failed: {done.stderr.strip()[-500:]}")
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable("apt-get installed postgresql, but no initdb was found under /usr/lib/postgresql")
    return bindir


def as_postgres(cmd: list[str]) -> list[str]:
    """``cmd`` as the user that may run the server: ``postgres`` via runuser when we are root."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


class Cluster:
    """One throwaway cluster: ``start``, ``url``, ``kill`` (a crash) and ``stop``."""

    def __init__(self, bindir: Path, base: Path | None = None, *, durable: bool = False) -> None:
        self.bindir = bindir
        self.durable = durable  # fsync on: for benchmarks, whose figures must include the flushes
        self.base = base or Path(tempfile.mkdtemp(prefix="gk-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres")
        self.data = self.base / "data"

    def _run(self, *args: str) -> None:
        done = subprocess.run(as_postgres([str(self.bindir / args[0]), *args[1:]]), capture_output=True, text=True)
        if done.returncode != 0:
            log = (self.base / "log").read_text(errors="replace")[-2000:] if (self.base / "log").exists() else ""
            raise PostgresUnavailable(f"{args[0]} failed: {done.stderr.strip()}\n{log}")

    def start(self) -> Cluster:
        """initdb (once) and start; returns when the server accepts connections (``pg_ctl -w``)."""
        if not self.data.exists():
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", USER, "--no-sync", "-E", "UTF8")
        # fsync off for tests: a test kills the server (never the machine), and the OS keeps what was
        # written. A durable cluster (the benchmarks) keeps PostgreSQL's defaults: fsync, full pages.
        options = f"-k {self.base} -p {PORT} -c listen_addresses=''"
        if not self.durable:
            options += " -c fsync=off -c full_page_writes=off"
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.base / "log"), "-w", "-t", "60", "start"
        )
        return self

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL Gatekeeper takes as ``database_url``."""
        return f"postgresql+psycopg://{USER}@/{database}?host={self.base}&port={PORT}"

    def conninfo(self, database: str = "postgres") -> str:
        return f"host={self.base} port={PORT} user={USER} dbname={database}"

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (FileNotFoundError, IndexError, ValueError):
            return None

    def kill(self) -> None:
        """A crash: SIGKILL to the postmaster and every backend it started (the next start recovers)."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        children = [int(p) for p in _children(pid)]
        for victim in (pid, *children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not all(_gone(victim) for victim in (pid, *children)):
            if time.monotonic() > deadline:
                raise PostgresUnavailable(f"PostgreSQL (pid {pid}) did not die of SIGKILL within 30 s")
            time.sleep(0.01)  # polling the kernel's process table, with a deadline
        # Its lock files name a dead pid now; a zombie (not yet reaped) would still look alive.
        (self.data / "postmaster.pid").unlink(missing_ok=True)
        (self.base / f".s.PGSQL.{PORT}.lock").unlink(missing_ok=True)

    def stop(self) -> None:
        if self.postmaster_pid() is not None:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


def _gone(pid: int) -> bool:
    """True when ``pid`` has exited (a zombie counts: it runs nothing and holds no lock)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def _children(pid: int) -> list[str]:
    """Processes whose parent is ``pid`` (from /proc: no ps needed)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == str(pid):
            out.append(stat.parent.name)
    return out


def main() -> int:
    try:
        bindir = install()
    except PostgresUnavailable as exc:
        if os.environ.get("CI", "").strip().lower() == "true":
            print(f"ERROR: CI=true needs PostgreSQL for the store suite: {exc}", file=sys.stderr)
            return 1
        print(f"WARNING: {exc}; the PostgreSQL tests will be skipped (and say why)", file=sys.stderr)
        return 0
    print(f"PostgreSQL: {bindir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Review page benchmarks: the real review server (``python -m gatekeeper review``) over HTTP,
on a home whose database holds 10,000 pending proposals, one of 1 MiB, and an edit of a 1 MiB file
(on disk, so the page's staleness check reads it) whose diff is 1,000 lines spread through it.

Everything is built in a temporary folder (never a real home). A missed target prints MISSED;
only a crash exits 1. ``--profile`` adds a cProfile of both pages, in-process, on every thread.

    .venv/bin/python bench/review_bench.py [--quick] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import io
import os
import pstats
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from harness import Figure, draft, log, make_home, p50, p99, standalone

from gatekeeper.review.auth import hash_password
from gatekeeper.store.store import ProposalDraft, Store

REPO = Path(__file__).resolve().parent.parent

PASSWORD = "correct horse battery staple"
QUEUE_MS, DETAIL_MS = 50.0, 100.0
BIG_BYTES = 1 << 20


@dataclass(frozen=True)
class Sizes:
    pending: int
    warmup: int
    requests: int  # timed requests per page


FULL_SIZES = Sizes(pending=10_000, warmup=5, requests=100)
QUICK_SIZES = Sizes(pending=10_000, warmup=2, requests=30)


# -- the fixture -----------------------------------------------------------------------------------


def _draft(i: int, content: bytes, tool: str = "create_note") -> ProposalDraft:
    path = f"notes/bench-{i}.md"
    workspace = "/tmp/gatekeeper-review-bench-workspace"
    return draft(path, content, tool=tool, workspace=workspace, ttl=timedelta(days=1), session="bench")


def big_text(size: int = BIG_BYTES) -> bytes:
    """About ``size`` bytes of Markdown-ish text with a zero-width space every fifth line."""
    lines, total, i = [], 0, 0
    while total < size:
        line = f"line {i}: the quick brown fox jumps over the lazy dog, again and again"
        if i % 5 == 0:
            line = line[:20] + "\u200b" + line[20:]
        lines.append(line)
        total += len(line.encode()) + 1
        i += 1
    return ("\n".join(lines) + "\n").encode()[:size].rsplit(b"\n", 1)[0] + b"\n"


CHANGED_LINES = 500  # lines edited in place across the 1 MiB file: a diff of 500 removed + 500 added


def edited(base: bytes, changed: int = CHANGED_LINES) -> bytes:
    """``base`` with ``changed`` lines spread evenly through it rewritten: the worst case for
    trimming common ends (every part of the file moves), a 2 × ``changed``-line diff."""
    lines = base.split(b"\n")
    step = max(1, (len(lines) - 1) // changed)
    for i in range(step // 2, len(lines) - 1, step)[:changed]:
        lines[i] = lines[i] + b" (edited)"
    return b"\n".join(lines)


@dataclass
class Fixture:
    home: Path
    big_id: str
    small_id: str
    build_seconds: float
    edit_id: str = ""


def build(work: Path, pending: int) -> Fixture:
    """``Store.propose`` in a loop: the real write path, so the hash chain and every row are right."""
    start = time.perf_counter()
    home = make_home(work / "home")
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hash_password(PASSWORD))
        small_id = store.propose(_draft(0, b"# note 0\n\nsmall\n")).id
        for i in range(1, pending):
            store.propose(_draft(i, f"# note {i}\n\nwritten by the bench\n".encode()))
        big_id = store.propose(_draft(pending, big_text(), tool="write_note")).id
        edit_id = store.propose(_edit_draft(work, pending + 1)).id
    return Fixture(home.path, big_id, small_id, time.perf_counter() - start, edit_id)


def _edit_draft(work: Path, i: int) -> ProposalDraft:
    """An edit of a 1 MiB file that is really on disk: the page reads it back (the staleness check)."""
    base = big_text()
    workspace = work / "workspace"
    (workspace / "notes").mkdir(parents=True, exist_ok=True)
    result = edited(base)
    d = _draft(i, result, tool="edit_file")
    (workspace / d.path).write_bytes(base)
    # What edit_file receives: the path and one {oldText, newText} per changed line, not the whole file.
    old, new = base.decode().split("\n"), result.decode().split("\n")
    edits = [{"oldText": a, "newText": b} for a, b in zip(old, new, strict=True) if a != b]
    arguments = {"path": d.path, "edits": edits}
    return dataclasses.replace(d, workspace=str(workspace), mode="edit", base=base, arguments=arguments)


# -- the server --------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``python -m gatekeeper review --port P`` under the fixture's home, stopped on exit."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = home / "review.log"

    def __enter__(self) -> Server:
        env = {**os.environ, "GATEKEEPER_HOME": str(self.home), "PYTHONPATH": str(REPO)}
        self._out = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gatekeeper", "review", "--port", str(self.port)],
            env=env,
            stdout=self._out,
            stderr=self._out,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{self.base}/login", timeout=1)
                return self
            except httpx.TransportError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError(f"review server did not start: {self.log.read_text()[-2000:]}") from None
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._out.close()


def logged_in(base: str, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """An httpx client with a same-origin browser tab's headers, logged in as alice."""
    client = httpx.Client(
        base_url=base,
        headers={"Origin": base, "Sec-Fetch-Site": "same-origin"},
        follow_redirects=False,
        transport=transport,
        timeout=30,
    )
    form = client.get("/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
    if token is None:
        raise RuntimeError(f"no CSRF token on the log-in page: {form.status_code} {form.text[:300]}")
    done = client.post("/login", data={"username": "alice", "password": PASSWORD, "csrf_token": token.group(1)})
    if done.status_code != 303 or done.headers.get("location") != "/":
        raise RuntimeError(f"log-in failed: {done.status_code} {done.text[:300]}")
    return client


# -- timing ------------------------------------------------------------------------------------------


def timed_gets(client: httpx.Client, url: str, sizes: Sizes, expect: str) -> tuple[list[float], int]:
    """Warm up, then time sequential GETs (ms); checks each answer is the page asked for."""
    size, times = 0, []
    for k in range(sizes.warmup + sizes.requests):
        start = time.perf_counter()
        response = client.get(url)
        body = response.content
        elapsed = (time.perf_counter() - start) * 1000
        if response.status_code != 200 or expect.encode() not in body:
            raise RuntimeError(f"GET {url}: {response.status_code} {body[:300]!r}")
        size = len(body)
        if k >= sizes.warmup:
            times.append(elapsed)
    return times, size


def page_figures(label: str, times: list[float], size: int, target: float | None) -> list[Figure]:
    return [
        Figure(
            f"{label} p50",
            p50(times),
            "ms",
            target,
            "<",
            note=f"p99 {p99(times):.1f} ms over {len(times)} requests, response {size / 1024:,.1f} KiB",
        ),
        Figure(f"{label} p99", p99(times), "ms"),
        Figure(f"{label} response size", size / 1024, "KiB"),
    ]


def run_in(work: Path, sizes: Sizes) -> list[Figure]:
    log(f"[R0] {sizes.pending:,} pending proposals with Store.propose, and one of 1 MiB")
    fx = build(work, sizes.pending)
    figures = [
        Figure(
            f"R0. build {sizes.pending:,} proposals + 1 MiB one",
            fx.build_seconds,
            "s",
            note="Store.propose in a loop (FULL sync), plus add_reviewer",
        )
    ]
    log(f"[R1/R2] review server over HTTP: {sizes.warmup} warm-up + {sizes.requests} timed GETs per page")
    with Server(fx.home) as server:
        client = logged_in(server.base)
        try:
            pending = f"{sizes.pending + 2} pending"
            queue, queue_size = timed_gets(client, "/", sizes, pending)
            big, big_size = timed_gets(client, f"/proposals/{fx.big_id}", sizes, fx.big_id)
            small, small_size = timed_gets(client, f"/proposals/{fx.small_id}", sizes, fx.small_id)
            edit, edit_size = timed_gets(client, f"/proposals/{fx.edit_id}", sizes, f"+{CHANGED_LINES}</span>")
        finally:
            client.close()
    figures += page_figures(f"R1. GET / (queue, {sizes.pending // 1000}k pending)", queue, queue_size, QUEUE_MS)
    figures += page_figures("R2. GET /proposals/{id} (1 MiB)", big, big_size, DETAIL_MS)
    figures += page_figures("R2. GET /proposals/{id} (small), context", small, small_size, None)
    label = f"R3. GET /proposals/{{id}} (edit of 1 MiB, {2 * CHANGED_LINES:,}-line diff)"
    figures += page_figures(label, edit, edit_size, DETAIL_MS)
    return figures


def run(quick: bool, work: Path | None = None) -> list[Figure]:
    """All review figures, built in ``work`` (a temporary folder when None)."""
    sizes = QUICK_SIZES if quick else FULL_SIZES
    if work is not None:  # e.g. bench/run.py's --workdir: always start from an empty folder
        work = work / "review-bench"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        return run_in(work, sizes)
    with tempfile.TemporaryDirectory(prefix="gatekeeper-review-bench-") as tmp:
        return run_in(Path(tmp), sizes)


# -- --profile: where a page's time goes, in-process -------------------------------------------------


async def _inline(func: Any, *args: Any, **kwargs: Any) -> Any:
    return func(*args, **kwargs)


def _report(prof: cProfile.Profile, top: int = 15) -> str:
    """Own time first (where the CPU goes), then cumulative time of Gatekeeper's and the templates' frames."""
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(r"gatekeeper/|templates/|jinja2/environment", top)
    return out.getvalue()


def profile(reps: int = 20) -> None:
    """The two pages through the ASGI app in-process (httpx.ASGITransport), profiled. Sync routes
    run inline on the profiled thread instead of in anyio's worker threads, which cProfile never sees."""
    import fastapi.routing

    from gatekeeper.home import Home
    from gatekeeper.review.app import Config, create_app

    with tempfile.TemporaryDirectory(prefix="gatekeeper-review-profile-") as tmp:
        fx = build(Path(tmp), QUICK_SIZES.pending)
        port = 8765
        app = create_app(Config(Home(fx.home), port))
        base = f"http://127.0.0.1:{port}"

        inner = getattr(app, "app", app)  # create_app wraps the FastAPI app in its Host/Origin guard

        async def go() -> None:
            async with (
                inner.router.lifespan_context(inner),
                httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=app),
                    base_url=base,
                    headers={"Origin": base, "Sec-Fetch-Site": "same-origin"},
                ) as client,
            ):
                form = await client.get("/login")
                token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
                assert token is not None, form.text[:300]
                data = {"username": "alice", "password": PASSWORD, "csrf_token": token.group(1)}
                done = await client.post("/login", data=data)
                assert done.status_code == 303, done.text[:300]
                for url in ("/", f"/proposals/{fx.big_id}", f"/proposals/{fx.edit_id}"):
                    for _ in range(3):
                        await client.get(url)
                    prof = cProfile.Profile()
                    start = time.perf_counter()
                    prof.enable()
                    for _ in range(reps):
                        response = await client.get(url)
                        assert response.status_code == 200
                    prof.disable()
                    each = (time.perf_counter() - start) / reps * 1000
                    print(f"\n== GET {url}: {each:.1f} ms per request in-process, under cProfile ({reps} requests)")
                    print(_report(prof))

        threaded = fastapi.routing.run_in_threadpool
        fastapi.routing.run_in_threadpool = _inline  # type: ignore[assignment]
        try:
            asyncio.run(go())
        finally:
            fastapi.routing.run_in_threadpool = threaded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests, < 20 s")
    parser.add_argument("--profile", action="store_true", help="after the table, cProfile both pages in-process")
    args = parser.parse_args(argv)
    status = standalone("gatekeeper-review-bench-", args.quick, run)
    if status == 0 and args.profile:
        try:
            profile()
        except Exception:
            traceback.print_exc()
            return 1
    return status


if __name__ == "__main__":
    sys.exit(main())

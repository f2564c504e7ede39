"""`gatekeeper up`: two supervised children, a log-in link, a line per event, restarts, clean stop."""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from gatekeeper.home import Home
from gatekeeper.store.proofs import PasswordProof
from gatekeeper.store.store import Store
from gatekeeper.up.supervise import port_mismatch, review_port
from tests.helpers import draft, patience, wait_until
from tests.process_support import Lines, alive
from tests.proxy_support import write_policy
from tests.review_support import PASSWORD, free_port, start_up
from tests.up_support import children_of, lines_for, running_on, start_allowance, stop


def lock_pid(lock: Path) -> int | None:
    """The pid the committer wrote in its lock (None while it is being written)."""
    try:
        return int(json.loads(lock.read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


@pytest.mark.slow
def test_up_runs_both_children_reports_events_restarts_and_stops(tmp_path: Path) -> None:
    policy = write_policy(tmp_path)
    home_dir, port = tmp_path / "home", free_port()
    proc = start_up(home_dir, port, policy, PASSWORD)
    lines = Lines(proc)
    try:
        lines.wait_for("Added reviewer alice")
        assert lines.wait_for("Review page: ").endswith(f"http://localhost:{port}/")
        assert "approve_with: any" in lines.wait_for("Approvals need")
        link = re.search(r"(http://\S+/login/link\?token=\S+)", lines.wait_for("one-time link")).group(1)  # type: ignore[union-attr]
        assert link.startswith(f"http://localhost:{port}/")  # passkeys need the name localhost
        with httpx.Client(follow_redirects=False) as client:
            assert client.get(link).status_code == 303  # the printed link logs in
            # the reviewer up created gets a passkey enrolment link too; it opens the enrol page
            lines.wait_for("Passkey enrolment link for alice")
            enrol = lines.wait_for("/enrol/")
            assert enrol.startswith(f"http://localhost:{port}/enrol/"), enrol
            assert 'id="enrol"' in client.get(enrol.strip()).text

        home = Home(home_dir)
        with Store(home.db_path) as store:
            p = store.propose(replace(draft("notes/from-up.md", b"hi\n"), workspace=str(tmp_path / "workspace")))
        lines.wait_for(f"proposal  {p.id}")
        with Store(home.db_path) as store:
            store.decide(
                p.id,
                verdict="approved",
                reviewer="alice",
                sha256=p.sha256,
                path="notes/from-up.md",
                proof=PasswordProof(PASSWORD),  # the password `up` was given, typed again
            )
        lines.wait_for(f"approved  {p.id}")
        committed = lines.wait_for(f"{p.id}", timeout=30)
        assert committed.startswith("committed") and committed.endswith("/workspace/notes/from-up.md"), committed
        assert (tmp_path / "workspace" / "notes" / "from-up.md").read_bytes() == b"hi\n"

        kids = children_of(proc.pid)
        assert len(kids) == 2
        review_pid = next(k for k in kids if "review" in Path(f"/proc/{k}/cmdline").read_text())
        os.kill(review_pid, signal.SIGKILL)
        lines.wait_for(r"review page stopped \(exit -9\); restarting in 1 s")
        lines.wait_for("restarted review page")
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/login").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the review page did not come back"
            time.sleep(0.2)

        # the committer too: it dies after it ran, so it is restarted, and takes its lock again
        lock = home_dir / "commit.lock"
        committer = next(k for k in children_of(proc.pid) if "commit" in Path(f"/proc/{k}/cmdline").read_text())
        assert lock_pid(lock) == committer
        os.kill(committer, signal.SIGKILL)
        lines.wait_for(r"committer stopped \(exit -9\); restarting in 1 s")
        lines.wait_for("restarted committer")
        wait_until(lambda: lock_pid(lock) not in (committer, None), 30, "a new committer's lock")
        assert lock_pid(lock) in children_of(proc.pid)

        kids = children_of(proc.pid)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        for kid in kids:
            assert not Path(f"/proc/{kid}").exists() or "zombie" in Path(f"/proc/{kid}/status").read_text().lower()
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/login", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_up_warns_when_review_url_names_another_port(tmp_path: Path) -> None:
    wanted, port = free_port(), free_port()
    policy = write_policy(tmp_path)
    policy.write_text(
        policy.read_text().replace("version: 1\n", f"version: 1\nreview_url: http://127.0.0.1:{wanted}\n")
    )
    proc = start_up(tmp_path / "home", port, policy, "a long enough password")
    lines = Lines(proc)
    try:
        warning = lines.wait_for("Warning: .*review_url")
        assert f"review_url http://127.0.0.1:{wanted} (port {wanted})" in warning
        assert f"listens on port {port}" in warning
        assert f"`gatekeeper up --port {wanted}`" in warning and f"http://localhost:{port}" in warning
        lines.wait_for("one-time link")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        stop(proc)


@pytest.mark.parametrize(
    ("url", "port"),
    [
        ("http://127.0.0.1:8765", 8765),
        ("http://localhost:9000/review", 9000),
        ("http://[::1]:9001", 9001),
        ("http://127.0.0.1", 80),
        ("https://localhost", 443),
        ("https://review.example.org:8765", None),
    ],
)
def test_review_port_of_a_review_url(url: str, port: int | None) -> None:
    assert review_port(url) == port


def test_port_mismatch_only_for_a_local_url_on_another_port() -> None:
    assert port_mismatch("http://127.0.0.1:8765", 8765, "policy.yaml") is None
    assert port_mismatch("https://review.example.org", 8765, "policy.yaml") is None
    said = port_mismatch("http://127.0.0.1:8765", 9000, "policy.yaml")
    assert said is not None and "--port 8765" in said and "http://localhost:9000" in said


class Answering(http.server.BaseHTTPRequestHandler):
    """Another program's web page: answers every GET."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"not gatekeeper")

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.slow
def test_no_link_before_the_page_answers_and_none_for_another_programs_page(tmp_path: Path) -> None:
    """The page is slow to start (held stopped before it listens): no link meanwhile, not even when
    another program starts answering on its port; when it goes on, it cannot listen, and `up` says so."""
    port = free_port()
    policy = write_policy(tmp_path)
    policy.write_text(policy.read_text().replace("version: 1\n", f"version: 1\nreview_url: http://127.0.0.1:{port}\n"))
    home = tmp_path / "home"
    proc = start_up(home, port, policy, PASSWORD)
    lines = Lines(proc)
    other: http.server.HTTPServer | None = None
    page = 0
    try:
        page = wait_until(lambda: next((k for k in children_of(proc.pid) if "review" in cmdline(k)), 0), 60, "the page")
        os.kill(page, signal.SIGSTOP)  # before it could listen: it takes a second to import
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/login", timeout=2)
        quiet = 2.0  # a wait for what must not come: the link (the old `up` printed it at once)
        assert not [line for line in lines_for(quiet, lines) if "login/link" in line]
        other = http.server.HTTPServer(("127.0.0.1", port), Answering)
        threading.Thread(target=other.serve_forever, daemon=True).start()
        assert httpx.get(f"http://127.0.0.1:{port}/").text == "not gatekeeper"
        assert not [line for line in lines_for(quiet, lines) if "login/link" in line], lines.seen
        os.kill(page, signal.SIGCONT)
        # The page, stopped mid-import, must finish importing before it fails to listen: that is the
        # work waited for here (no promise on its speed), so a last resort, not a start-up allowance.
        assert proc.wait(timeout=patience(start_allowance())) == 1
        said = lines_for(1, lines)
        error = next(line for line in lines.seen if line.startswith("Error:"))
        assert re.match(r"Error: the review page could not start \(exit \d+\): ", error), error
        assert "address already in use" in error and "`gatekeeper up --port N`" in error, error
        assert not [line for line in lines.seen if "login/link" in line or "restart" in line], said
        assert running_on(home) == []
    finally:
        if page and alive(page):
            os.kill(page, signal.SIGCONT)
        stop(proc)
        if other is not None:
            other.shutdown()
            other.server_close()


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""

"""The review page: every attack is refused, leaves an event, and decides nothing.

The Host/Origin guard, the security headers and the log-in throttle (with the server's log) are
tested over real HTTP against a real server; the rest runs the same app in-process.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from typing import NamedTuple

import httpx
import pytest
from click.testing import CliRunner
from itsdangerous import URLSafeTimedSerializer

from gatekeeper.canonical import format_ts, utc_now
from gatekeeper.cli import cli
from gatekeeper.home import Home
from gatekeeper.review.auth import Tokens
from gatekeeper.store.store import Proposed, Store
from tests.helpers import draft, make_home
from tests.review_support import (
    PASSWORD,
    InProcess,
    Page,
    Site,
    decisions,
    event_count,
    hashed,
    review_app,
    review_server,
)


@pytest.fixture
def reviewers(home: Home) -> None:
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        store.add_reviewer("bob", hashed())


@pytest.fixture
def site(home: Home, reviewers: None) -> Iterator[InProcess]:
    """The app in-process: for everything the transport cannot change."""
    with review_app(home) as app:
        yield app


@pytest.fixture
def served(home: Home, reviewers: None) -> Iterator[str]:
    """A real server over real HTTP: for the Host/Origin guard, headers as sent, and its log."""
    with review_server(home) as base:
        yield base


class Served(NamedTuple):
    home: Home
    base: str


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One real server shared by the guard tests: each refuses its own proposal and changes nothing,
    so they need not pay for a server start each."""
    home = make_home(tmp_path_factory.mktemp("guarded") / "home")
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
    with review_server(home) as base:
        yield Served(home, base)


def propose(home: Home, path: str = "notes/a.md", content: bytes = b"hello\n", **kw: object) -> Proposed:
    with Store(home.db_path) as store:
        return store.propose(draft(path, content, **kw))  # type: ignore[arg-type]


def refused_with_event(home: Home, response: httpx.Response, status: int, before: int) -> None:
    assert response.status_code == status, response.text[:300]
    assert event_count(home, "request_refused") == before + 1
    assert decisions(home) == []


def test_login_approve_and_reject_happy_path(home: Home, site: Site) -> None:
    a, b = propose(home, "notes/a.md", b"A\n"), propose(home, "notes/b.md", b"B\n")
    page = Page(site)
    assert page.client.get("/").status_code == 303  # not logged in: to the log-in page
    assert page.login().status_code == 303
    queue = page.client.get("/")
    assert queue.status_code == 200 and "notes/a.md" in queue.text and "2 pending" in queue.text
    csrf = page.csrf(a.id)
    assert page.approve(a.id, a.sha256, "notes/a.md", csrf).status_code == 303
    rejected = page.client.post(f"/proposals/{b.id}/reject", data={"reason": "not now", "csrf_token": csrf})
    assert rejected.status_code == 303
    assert decisions(home) == [(a.id, "approved", "alice"), (b.id, "rejected", "alice")]
    detail = page.client.get(f"/api/proposals/{b.id}").json()
    assert detail["status"] == "rejected" and detail["decision"]["reason"] == "not now"
    assert [p["id"] for p in page.client.get("/api/proposals?status=approved").json()["proposals"]] == [a.id]
    assert page.client.get("/api/count").json() == {"pending": 0}


def test_security_headers_on_every_page(guarded: Served) -> None:
    p = propose(guarded.home)
    page = Page(guarded.base)
    page.login()
    for url in (
        "/login",
        "/",
        f"/proposals/{p.id}",
        f"/proposals/{p.id}/raw",
        "/api/proposals",
        "/nope",
        "/static/review.css",
    ):
        response = page.client.get(url)
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"], url
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["referrer-policy"] == "same-origin"
        assert response.headers["cache-control"] == "no-store"
    refused = httpx.get(f"{guarded.base}/login", headers={"Host": "evil.example"})
    assert refused.status_code == 400 and refused.headers["x-frame-options"] == "DENY"


def test_no_session(home: Home, site: Site) -> None:
    p = propose(home)
    before = event_count(home, "request_refused")
    response = Page(site).approve(p.id, p.sha256, "notes/a.md", "x" * 64)
    refused_with_event(home, response, 401, before)
    assert Page(site).client.get("/api/proposals").status_code == 401  # JSON API too
    assert Page(site).client.get("/api/proposals").json() == {"error": "log in first"}


def test_forged_cookie(home: Home, site: Site) -> None:
    p = propose(home)
    page = Page(site)
    forged = URLSafeTimedSerializer(b"k" * 32, salt="gatekeeper.review.session").dumps({"sid": "x"})
    page.client.cookies.set("gk_session", forged)
    before = event_count(home, "request_refused")
    refused_with_event(home, page.approve(p.id, p.sha256, "notes/a.md", "0" * 64), 401, before)


def test_expired_session(home: Home, site: Site) -> None:
    p = propose(home)
    page = Page(site)
    page.login()
    csrf = page.csrf(p.id)
    conn = sqlite3.connect(home.db_path)
    conn.execute("UPDATE review_session SET expires_at = ?", (format_ts(utc_now() - timedelta(seconds=1)),))
    conn.commit()
    before = event_count(home, "request_refused")
    refused_with_event(home, page.approve(p.id, p.sha256, "notes/a.md", csrf), 401, before)


def test_logged_out_session_is_dead_server_side(home: Home, site: Site) -> None:
    p = propose(home)
    page = Page(site)
    page.login()
    csrf = page.csrf(p.id)
    cookie = page.client.cookies.get("gk_session")
    assert cookie is not None
    assert page.client.post("/logout", data={"csrf_token": csrf}).status_code == 303
    page.client.cookies.set("gk_session", cookie)  # an attacker who kept the cookie
    before = event_count(home, "request_refused")
    refused_with_event(home, page.approve(p.id, p.sha256, "notes/a.md", csrf), 401, before)


def test_disabled_reviewer_stops_at_once(home: Home, site: Site) -> None:
    p = propose(home)
    page = Page(site)
    page.login("bob")
    csrf = page.csrf(p.id)
    with Store(home.db_path) as store:
        store.disable_reviewer("bob")
    before = event_count(home, "request_refused")
    refused_with_event(home, page.approve(p.id, p.sha256, "notes/a.md", csrf), 401, before)
    assert page.client.get("/").status_code == 303


def test_changed_password_ends_old_sessions(home: Home, site: Site) -> None:
    p = propose(home)
    page = Page(site)
    assert page.login("alice").status_code == 303
    csrf = page.csrf(p.id)
    result = CliRunner().invoke(
        cli, ["--home", str(home.path), "reviewer", "passwd", "alice", "--password-stdin"], input="n3w secret pass\n"
    )
    assert result.exit_code == 0, result.output
    gone = page.client.get("/")  # the cookie from before the change
    assert gone.status_code == 303 and gone.headers["location"] == "/login"
    assert "ended 1 open session" in result.output, result.output
    before = event_count(home, "request_refused")
    refused_with_event(home, page.approve(p.id, p.sha256, "notes/a.md", csrf), 401, before)
    conn = sqlite3.connect(home.db_path)
    payload = conn.execute("SELECT payload FROM audit_event WHERE kind = 'reviewer_password_changed'").fetchone()
    kid = home.keys.signer().key_id  # the event carries the row's new signature (migration 0008)
    assert json.loads(payload[0]) == {"reviewer": "alice", "sessions_ended": 1, "key_id": kid} | {
        "signature": conn.execute("SELECT signature FROM reviewer WHERE name = 'alice'").fetchone()[0]
    }
    assert Page(site).login("alice", PASSWORD).status_code == 401  # the old password is gone too
    assert Page(site).login("alice", "n3w secret pass").status_code == 303


@pytest.mark.parametrize("csrf", [None, "", "0" * 64])
def test_missing_or_wrong_csrf(home: Home, site: Site, csrf: str | None) -> None:
    p = propose(home)
    page = Page(site)
    page.login()
    before = event_count(home, "request_refused")
    refused_with_event(home, page.approve(p.id, p.sha256, "notes/a.md", csrf), 403, before)


def test_csrf_of_another_session_is_refused(home: Home, site: Site) -> None:
    p = propose(home)
    mallory, alice = Page(site), Page(site)
    mallory.login("bob")
    alice.login("alice")
    before = event_count(home, "request_refused")
    refused_with_event(home, alice.approve(p.id, p.sha256, "notes/a.md", mallory.csrf(p.id)), 403, before)


@pytest.mark.parametrize(
    "headers, status",
    [
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": "http://127.0.0.1:1"}, 403),
        ({"Origin": "null"}, 403),
        ({"Sec-Fetch-Site": "cross-site"}, 403),
        ({"Host": "evil.example"}, 400),
        ({"Host": "127.0.0.1:1"}, 400),
        ({"Host": "localhost"}, 400),
    ],
)
def test_foreign_origin_fetch_site_and_host(guarded: Served, headers: dict[str, str], status: int) -> None:
    home = guarded.home
    p = propose(home)
    page = Page(guarded.base)
    page.login()
    csrf = page.csrf(p.id)
    before = event_count(home, "request_refused")
    refused_with_event(home, page.approve(p.id, p.sha256, "notes/a.md", csrf, headers=headers), status, before)


def test_missing_origin_is_refused(guarded: Served) -> None:
    home = guarded.home
    p = propose(home)
    page = Page(guarded.base)
    page.login()
    csrf = page.csrf(p.id)
    del page.client.headers["Origin"]
    before = event_count(home, "request_refused")
    refused_with_event(home, page.approve(p.id, p.sha256, "notes/a.md", csrf), 403, before)


@pytest.mark.parametrize("field", ["sha256", "path"])
def test_digest_or_path_that_differs_is_409(home: Home, site: Site, field: str) -> None:
    p = propose(home)
    page = Page(site)
    page.login()
    csrf = page.csrf(p.id)
    before = event_count(home, "decision_refused")
    sha, path = ("f" * 64, "notes/a.md") if field == "sha256" else (p.sha256, "notes/other.md")
    response = page.approve(p.id, sha, path, csrf)
    assert response.status_code == 409 and "reload the proposal page" in response.text
    assert event_count(home, "decision_refused") == before + 1 and decisions(home) == []


def test_approval_replayed_onto_another_proposal(home: Home, site: Site) -> None:
    a, b = propose(home, "notes/a.md", b"A"), propose(home, "notes/b.md", b"B")
    page = Page(site)
    page.login()
    csrf = page.csrf(a.id)
    assert page.approve(a.id, a.sha256, "notes/a.md", csrf).status_code == 303
    replay = page.approve(b.id, a.sha256, "notes/a.md", csrf)
    assert replay.status_code == 409
    assert decisions(home) == [(a.id, "approved", "alice")]


def test_second_decision_is_409(home: Home, site: Site) -> None:
    p = propose(home)
    page = Page(site)
    page.login()
    csrf = page.csrf(p.id)
    assert page.approve(p.id, p.sha256, "notes/a.md", csrf).status_code == 303
    again = page.client.post(f"/proposals/{p.id}/reject", data={"reason": "changed my mind", "csrf_token": csrf})
    assert again.status_code == 409 and decisions(home) == [(p.id, "approved", "alice")]


def test_expired_proposal_cannot_be_approved(home: Home, site: Site) -> None:
    p = propose(home, expires_in=-1)
    page = Page(site)
    page.login()
    csrf = page.csrf(p.id)
    response = page.approve(p.id, p.sha256, "notes/a.md", csrf)
    assert response.status_code == 409 and "expired" in response.text and decisions(home) == []


def test_rejection_needs_a_reason(home: Home, site: Site) -> None:
    p = propose(home)
    page = Page(site)
    page.login()
    response = page.client.post(f"/proposals/{p.id}/reject", data={"reason": " ", "csrf_token": page.csrf(p.id)})
    assert response.status_code == 400 and decisions(home) == []


def test_login_link_works_once(home: Home, site: Site) -> None:
    token = Tokens(home.read_key()).login_link("alice")
    page = Page(site)
    first = page.client.get(f"/login/link?token={token}")
    assert first.status_code == 303 and page.client.get("/").status_code == 200
    before = event_count(home, "request_refused")
    second = Page(site).client.get(f"/login/link?token={token}")
    assert second.status_code == 400 and "already used" in second.text
    assert event_count(home, "request_refused") == before + 1
    tampered = Page(site).client.get(f"/login/link?token={token[:-2]}xx")
    assert tampered.status_code == 400


def test_failed_logins_are_events_and_slowed(home: Home, served: str) -> None:
    page = Page(served)
    for _ in range(5):
        assert page.login("alice", "wrong password!!").status_code == 401
    assert event_count(home, "login_failed") == 5
    locked = page.login("alice", PASSWORD)  # right password, but too many failures just now
    assert locked.status_code == 429 and event_count(home, "login_failed") == 6
    assert Page(served).login("bob").status_code == 303  # other names are not affected
    log = (home.path / "review.log").read_text()
    assert PASSWORD not in log and "wrong password" not in log


def test_login_form_needs_its_csrf_token(home: Home, site: Site) -> None:
    before = event_count(home, "request_refused")
    response = Page(site).client.post("/login", data={"username": "alice", "password": PASSWORD})
    assert response.status_code == 403 and event_count(home, "request_refused") == before + 1
    assert "gk_session" not in response.cookies


def test_session_cookie_flags(home: Home, site: Site) -> None:
    response = Page(site).login()
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Max-Age=28800" in cookie


def test_content_is_never_rendered_as_html(home: Home, site: Site) -> None:
    p = propose(home, "notes/x.md", b"<script>alert(1)</script>\n**bold** <b>b</b> &amp;\n")
    page = Page(site)
    page.login()
    html = page.client.get(f"/proposals/{p.id}").text
    assert "<script>alert(1)</script>" not in html and "<b>b</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&amp;amp;" in html
    raw = page.client.get(f"/proposals/{p.id}/raw")
    assert raw.content == b"<script>alert(1)</script>\n**bold** <b>b</b> &amp;\n"
    assert raw.headers["content-disposition"].startswith("attachment")

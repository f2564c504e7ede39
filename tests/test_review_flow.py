"""The review page as a person meets it from the agent's link, over real HTTP (a `gatekeeper review`
process): logging in lands on that proposal (never on another site), a wrong step-up password shows
the approve form again with the tries left, and "already decided" says by whom and when."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from gatekeeper import humane
from gatekeeper.home import Home
from gatekeeper.review.auth import Tokens
from gatekeeper.store.store import Proposed, Store
from tests.helpers import draft
from tests.review_support import PASSWORD, Page, decisions, hashed, review_server

# Each would leave this app: another host, a scheme, a backslash (browsers read "/\" as "//"), a tab
# (browsers drop it: "/\t/evil" is "//evil"), a log-in loop, a JSON route, or no leading slash.
HOSTILE = [
    "//evil.example",
    "//evil.example/proposals/x",
    "https://evil.example/",
    "http:/evil.example",
    "javascript:alert(1)",
    "/\\evil.example",
    "/\\/evil.example",
    "\\\\evil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    " //evil.example",
    "evil.example",
    "/login?next=//evil.example",
    "/api/proposals",
]


@pytest.fixture
def served(home: Home) -> Iterator[str]:
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        store.add_reviewer("bob", hashed())
    with review_server(home) as base:
        yield base


def propose(home: Home, path: str = "notes/a.md") -> Proposed:
    with Store(home.db_path) as store:
        return store.propose(draft(path, b"hello\n"))


def login_form(page: Page, url: str) -> tuple[str, str | None]:
    """The log-in page at ``url``: its CSRF token and the hidden ``next`` it carries, if any."""
    html = page.client.get(url).text
    token = re.search(r'name="csrf_token" value="([^"]+)"', html)
    after = re.search(r'name="next" id="login-next" value="([^"]*)"', html)
    assert token is not None, html[:500]
    return token.group(1), None if after is None else after.group(1)


def post_login(page: Page, token: str, after: str | None, password: str = PASSWORD) -> str:
    data = {"username": "alice", "password": password, "csrf_token": token}
    if after is not None:
        data["next"] = after
    answer = page.client.post("/login", data=data)
    assert answer.status_code in (303, 401), answer.text[:300]
    return str(answer.headers.get("location", ""))


def test_the_agents_link_lands_on_its_proposal_and_nowhere_else(home: Home, served: str) -> None:
    p = propose(home)
    page = Page(served)
    sent = page.client.get(f"/proposals/{p.id}")  # the review_url the proxy returned, before logging in
    assert sent.status_code == 303 and sent.headers["location"] == f"/login?next=/proposals/{p.id}"
    token, after = login_form(page, sent.headers["location"])
    assert after == f"/proposals/{p.id}"
    # A wrong password keeps the way back; the right one then lands on the proposal, not the queue.
    wrong = page.client.post(
        "/login", data={"username": "alice", "password": "nope", "csrf_token": token, "next": after}
    )
    assert wrong.status_code == 401 and f'name="next" id="login-next" value="/proposals/{p.id}"' in wrong.text
    token = re.search(r'name="csrf_token" value="([^"]+)"', wrong.text).group(1)  # type: ignore[union-attr]
    assert post_login(page, token, after) == f"/proposals/{p.id}"
    shown = page.client.get(f"/proposals/{p.id}")
    assert shown.status_code == 200 and p.sha256 in shown.text
    assert Page(served).client.get("/").headers["location"] == "/login"  # the queue itself needs no next
    # And never off this app: a hostile next is neither carried in the form nor followed if posted.
    for hostile in HOSTILE:
        page = Page(served)
        token, after = login_form(page, f"/login?next={quote(hostile, safe='')}")
        assert after is None, hostile  # not even carried in the form
        assert post_login(page, token, hostile) == "/", hostile  # posted anyway (a forged form): the queue


def test_the_one_time_link_ends_where_the_log_in_started(home: Home, served: str) -> None:
    p = propose(home)
    tokens = Tokens(home.read_key())
    # Opened in the browser that was sent to log in from the agent's link: back to that proposal.
    page = Page(served)
    login_form(page, page.client.get(f"/proposals/{p.id}").headers["location"])
    answer = page.client.get("/login/link", params={"token": tokens.login_link("alice")})
    assert answer.status_code == 303 and answer.headers["location"] == f"/proposals/{p.id}"
    # A link that names its page; and one that names another site goes to the queue.
    fresh = Page(served)
    named = fresh.client.get("/login/link", params={"token": tokens.login_link("alice"), "next": f"/proposals/{p.id}"})
    assert named.headers["location"] == f"/proposals/{p.id}"
    for hostile in ("//evil.example", "/\\evil.example", "https://evil.example/"):
        other = Page(served).client.get("/login/link", params={"token": tokens.login_link("alice"), "next": hostile})
        assert other.status_code == 303 and other.headers["location"] == "/"


def approve_error(html: str) -> str:
    found = re.search(r'<p class="error" id="approve-error" role="alert">([^<]*)</p>', html)
    assert found is not None, html[:800]
    return found.group(1)


def test_a_wrong_step_up_password_shows_the_form_again_with_the_tries_left(home: Home, served: str) -> None:
    p = propose(home)
    page = Page(served)
    token, _ = login_form(page, "/login")
    assert post_login(page, token, None, password="a wrong log-in") == ""  # the same counter: 4 left
    token, _ = login_form(page, "/login")
    assert post_login(page, token, None) == "/"
    said = []
    for _ in range(4):
        wrong = page.approve(p.id, p.sha256, "notes/a.md", page.csrf(p.id), password="guess" * 3)
        assert wrong.status_code == 409
        assert 'id="approve-password"' in wrong.text and f'action="/proposals/{p.id}/approve"' in wrong.text
        assert p.sha256 in wrong.text  # the proposal itself, not a bare error page
        said.append(approve_error(wrong.text))
    assert "Wrong password: nothing was approved." in said[0]
    assert ["3 tries left" in said[0], "2 tries left" in said[1], "1 try left" in said[2]] == [True] * 3
    assert "locked for 15 minutes" in said[0] and "That was the last try" in said[3]
    locked = page.approve(p.id, p.sha256, "notes/a.md", page.csrf(p.id))  # even the right one waits
    assert locked.status_code == 429 and 'id="approve-password"' in locked.text
    assert "Too many wrong passwords" in approve_error(locked.text)
    assert decisions(home) == []


def test_already_decided_says_by_whom_and_when(home: Home, served: str) -> None:
    p = propose(home)
    alice, bob = Page(served), Page(served)
    assert alice.login("alice").status_code == 303 and bob.login("bob").status_code == 303
    bobs_csrf = bob.csrf(p.id)  # bob's page still shows the approve form
    assert alice.approve(p.id, p.sha256, "notes/a.md", alice.csrf(p.id)).status_code == 303
    conn = sqlite3.connect(home.db_path)
    (at,) = conn.execute("SELECT decided_at FROM decision").fetchone()
    conn.close()
    for late in (
        bob.approve(p.id, p.sha256, "notes/a.md", bobs_csrf),
        bob.client.post(
            f"/proposals/{p.id}/reject",
            data={"csrf_token": bobs_csrf, "reason": "no", "sha256": p.sha256, "path": "notes/a.md"},
        ),
    ):
        assert late.status_code == 409
        message = re.search(r'id="error-message">([^<]*)<', late.text)
        assert message is not None
        text = message.group(1)
        assert "already decided: approved by alice " in text, text
        assert f", at {humane.local(at)} ({humane.iso(at)})" in text, text
    assert [d[1:] for d in decisions(home)] == [("approved", "alice")]

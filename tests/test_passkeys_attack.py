"""The attack of issue 14, scripted end to end: browsers do not scope cookies by port, so a listener
on another loopback port receives the reviewer's ``gk_session`` as soon as their browser loads
anything from it. With the cookie (and the right Host and Origin), a script tries to approve: with
the cookie alone, with the CSRF token read through it, with an assertion taken from another
proposal's approval, and with that assertion replayed whole. Every try is refused and leaves an
audit event; nothing is decided."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from gatekeeper.trust.approval import Assertion
from tests.commit_support import World, make_world
from tests.passkey_browser_support import (
    Served,
    enrol,
    enrolment_link,
    passkey_log_in,
    served,
    virtual_authenticator,
)
from tests.requirements import require_chromium
from tests.review_support import CHROMIUM, CHROMIUM_ARGS, free_port


class Listener(ThreadingHTTPServer):
    """Another program on this machine: a page with an image, and every Cookie header it is sent."""

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), Heard)
        self.cookies: list[str] = []
        self.image_requested = threading.Event()


class Heard(BaseHTTPRequestHandler):
    server: Listener

    def do_GET(self) -> None:
        self.server.cookies.append(self.headers.get("Cookie", ""))
        if self.path == "/pixel.gif":
            self.server.image_requested.set()
            body, kind = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;", "image/gif"
        else:
            body, kind = b'<!doctype html><p>a harmless page<img src="/pixel.gif">', "text/html"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener(free_port())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path / "w")


def events(world: World, kind: str) -> list[dict[str, Any]]:
    return [
        json.loads(p) for (p,) in world.db_rows("SELECT payload FROM audit_event WHERE kind = ? ORDER BY seq", kind)
    ]


def steal_cookie(world: World, site: Served, listener: Listener) -> tuple[str, str]:
    """The reviewer logs in with a passkey and approves a proposal; then follows a link to another
    local program's page, which loads an image. Returns the cookie it heard and the approved id."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        virtual_authenticator(page)
        enrol(page, enrolment_link(world))
        passkey_log_in(page, site)
        taken = world.propose("notes/taken.md", b"taken\n", verdict=None)
        page.goto(f"{site.base}/proposals/{taken}")
        page.click("#approve")
        page.wait_for_selector("#status:text('approved')", timeout=15_000)
        page.goto(f"http://localhost:{listener.server_address[1]}/")
        assert listener.image_requested.wait(10)
        browser.close()
    # Same host, another port: the browser sent the session cookie there too.
    stolen = [m.group(1) for c in listener.cookies if (m := re.search(r"gk_session=([^;\s]+)", c))]
    assert stolen, f"the listener heard no session cookie: {listener.cookies}"
    return stolen[-1], taken


def test_a_stolen_session_cookie_cannot_approve(world: World, listener: Listener) -> None:
    require_chromium()
    with served(world) as site:
        stolen, taken = steal_cookie(world, site, listener)
        target = world.propose("notes/target.md", b"target\n", verdict=None)
        ((stored, nonce, digests),) = world.db_rows(
            "SELECT assertion, nonce, assertion_digests FROM decision WHERE proposal_id = ?", taken
        )
        lifted = json.dumps(Assertion.from_json(stored).credential())
        row = world.db_rows("SELECT sha256, path, mode FROM proposal WHERE id = ?", target)[0]
        shown = dict(zip(("sha256", "path", "mode"), row, strict=True))
        headers = {"Cookie": f"gk_session={stolen}", "Origin": site.base, "Sec-Fetch-Site": "same-origin"}
        with httpx.Client(base_url=site.base, headers=headers) as script:
            # 1. the cookie alone
            alone = script.post(f"/proposals/{target}/approve", data=shown)
            assert alone.status_code == 403 and "did not come from this page" in alone.text
            # 2. the CSRF token, read through the cookie (a page the cookie may read)
            page_html = script.get(f"/proposals/{target}").text
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', page_html).group(1)  # type: ignore[union-attr]
            with_csrf = script.post(f"/proposals/{target}/approve", data={**shown, "csrf_token": csrf})
            assert with_csrf.status_code == 409 and "the session alone is not enough" in with_csrf.text
            # 3. a fresh challenge for the target (the cookie gets that far), answered with the
            #    assertion taken from the other proposal's approval
            start = script.post(f"/api/proposals/{target}/challenge", data={"csrf_token": csrf}).json()
            answer = {**shown, "csrf_token": csrf, "nonce": start["nonce"], "digests": json.dumps(start["digests"])}
            other = script.post(f"/api/proposals/{target}/approve", data={**answer, "credential": lifted})
            assert other.status_code == 409 and "signs another challenge" in other.json()["error"]
            # 4. that approval replayed whole: its nonce, digests and assertion
            replay = {**shown, "csrf_token": csrf, "nonce": nonce, "digests": digests, "credential": lifted}
            replayed = script.post(f"/api/proposals/{target}/approve", data=replay)
            assert replayed.status_code == 409 and "already used" in replayed.json()["error"]

    assert world.db_rows("SELECT proposal_id FROM decision") == [(taken,)]  # nothing else decided
    assert {e["action"] for e in events(world, "request_refused") if "action" in e} >= {f"approve {target}"}
    refused = [e["why"] for e in events(world, "approval_refused")]
    assert len(refused) == 3, refused
    assert "the session alone is not enough" in refused[0]
    assert "signs another challenge" in refused[1]
    assert "already used" in refused[2]

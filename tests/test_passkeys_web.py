"""The review page's passkey routes, in-process with a software authenticator (the browser path is
test_passkeys_browser.py): both host names answer, only localhost serves passkeys; enrolment links
work once; approve one, a batch in the challenge's order only, a passkey log-in that works once."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gatekeeper.home import Home
from gatekeeper.store.store import Store
from gatekeeper.trust.approval import RelyingParty, unb64url
from tests.commit_support import make_world
from tests.helpers import TEST_PASSWORD, draft
from tests.passkey_browser_support import served
from tests.review_support import IN_PROCESS_PORT, InProcess, Page, hashed, review_app
from tests.webauthn_authenticator import SoftAuthenticator

LOCAL = f"http://localhost:{IN_PROCESS_PORT}"
RP = RelyingParty.for_review_url(LOCAL)


@pytest.fixture
def sites(home: Home) -> Iterator[tuple[InProcess, InProcess]]:
    """The app as reached at 127.0.0.1 and at localhost."""
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        store.add_reviewer("bob", hashed())
    with review_app(home) as ip:
        yield ip, InProcess(ip.app, LOCAL)


def enrol_over_http(page: Page, home: Home, auth: SoftAuthenticator, label: str = "key") -> Page:
    with Store(home.db_path) as store:
        token = store.issue_enrolment("alice")
    html = page.client.get(f"/enrol/{token}").text
    options = re.search(r'data-options="([^"]+)"', html).group(1).replace("&#34;", '"')  # type: ignore[union-attr]
    credential = auth.register_options(options.replace("&quot;", '"'))
    done = page.client.post(f"/api/enrol/{token}", data={"credential": json.dumps(credential), "label": label})
    assert done.status_code == 200, done.text
    assert done.json() == {"reviewer": "alice", "label": label}
    again = page.client.post(f"/api/enrol/{token}", data={"credential": json.dumps(credential), "label": label})
    assert again.status_code == 410 and "already used" in again.json()["error"]
    return page


def decisions(home: Home) -> list[tuple[str, str, int | None]]:
    with Store(home.db_path) as store, store.transaction() as tx:
        return [
            (r[0], r[1], r[2]) for r in tx.all("SELECT proposal_id, method, assertion_index FROM decision ORDER BY id")
        ]


def test_both_hosts_answer_only_localhost_serves_passkeys(home: Home, sites: tuple[InProcess, InProcess]) -> None:
    ip, local = sites
    at_ip, at_local = Page(ip), Page(local)
    login_ip = at_ip.client.get("/login")
    assert (
        login_ip.status_code == 200
        and f'href="{LOCAL}/login"' in login_ip.text
        and 'id="passkey-login"' not in login_ip.text
    )
    assert 'id="passkey-login"' in at_local.client.get("/login").text
    assert at_local.client.get("/login", headers={"Host": "localhost:1"}).status_code == 400
    with Store(home.db_path) as store:
        token = store.issue_enrolment("alice")
    moved = at_ip.client.get(f"/enrol/{token}")
    assert moved.status_code == 409 and f'href="{LOCAL}/enrol/{token}"' in moved.text
    assert at_local.client.get("/enrol/not-a-token").status_code == 410
    enrol_over_http(at_local, home, SoftAuthenticator(origin=LOCAL))
    # The same reviewer logged in with the password at 127.0.0.1 is sent to localhost, and the
    # challenge route says why if a script asks there.
    assert at_ip.login().status_code == 303
    queue = at_ip.client.get("/")
    assert queue.status_code == 409 and f'href="{LOCAL}/"' in queue.text
    with Store(home.db_path) as store:
        p = store.propose(draft("notes/x.md", b"x\n"))
    shown = at_ip.client.get(f"/proposals/{p.id}")
    assert shown.status_code == 409 and f'href="{LOCAL}/proposals/{p.id}"' in shown.text and p.sha256 not in shown.text


def test_approve_one_then_a_batch_only_in_the_challenges_order(home: Home, sites: tuple[InProcess, InProcess]) -> None:
    _ip, local = sites
    page, auth = Page(local), SoftAuthenticator(origin=LOCAL)
    enrol_over_http(page, home, auth)
    assert page.login().status_code == 303
    with Store(home.db_path) as store:
        one, *three = (store.propose(draft(f"notes/{i}.md", f"{i}\n".encode())) for i in range(4))
    csrf = page.csrf(one.id)
    start = page.client.post(f"/api/proposals/{one.id}/challenge", data={"csrf_token": csrf}).json()
    assert start["options"]["userVerification"] == "required"
    assert [c["id"] for c in start["options"]["allowCredentials"]] == [auth.credential_b64]
    signed = auth.assert_(unb64url(start["options"]["challenge"]))
    shown = {"sha256": one.sha256, "path": "notes/0.md", "mode": "create", "csrf_token": csrf}
    proof = {"nonce": start["nonce"], "digests": json.dumps(start["digests"]), "credential": json.dumps(signed)}
    done = page.client.post(f"/api/proposals/{one.id}/approve", data={**shown, **proof})
    assert done.status_code == 200 and done.json() == {"approved": [one.id]}

    ids = [p.id for p in three]
    start = page.client.post("/api/challenge", data={"csrf_token": csrf, "ids": ids}).json()
    signed = auth.assert_(unb64url(start["options"]["challenge"]))
    items = [
        {"id": p.id, "sha256": p.sha256, "path": f"notes/{i + 1}.md", "mode": "create"} for i, p in enumerate(three)
    ]
    proof = {"nonce": start["nonce"], "digests": json.dumps(start["digests"]), "credential": json.dumps(signed)}
    swapped = page.client.post(
        "/api/approve-selected", data={"csrf_token": csrf, "items": json.dumps(items[::-1]), **proof}
    )
    assert swapped.status_code == 409 and "another proposal" in swapped.json()["error"]
    assert [d[0] for d in decisions(home)] == [one.id]  # all or none
    done = page.client.post("/api/approve-selected", data={"csrf_token": csrf, "items": json.dumps(items), **proof})
    assert done.status_code == 200 and done.json() == {"approved": ids}
    assert decisions(home) == [(one.id, "passkey", 0)] + [(pid, "passkey", i) for i, pid in enumerate(ids)]


def test_no_passkey_means_the_password_and_a_passkey_log_in_works_once(
    home: Home, sites: tuple[InProcess, InProcess]
) -> None:
    _ip, local = sites
    bob = Page(local)
    assert bob.login("bob").status_code == 303
    with Store(home.db_path) as store:
        p = store.propose(draft("notes/bob.md", b"bob\n"))
    html = bob.client.get(f"/proposals/{p.id}").text
    assert 'id="approve-password"' in html and "passkeys.js" not in html  # no JavaScript needed
    refused = bob.client.post(f"/api/proposals/{p.id}/challenge", data={"csrf_token": bob.csrf(p.id)})
    assert refused.status_code == 409 and "You have no passkey here" in refused.json()["error"]

    # counting=False: a counter that stays 0 (as many platform passkeys): only the spent nonce refuses a replay
    alice, auth = Page(local), SoftAuthenticator(origin=LOCAL, counting=False)
    enrol_over_http(alice, home, auth)
    csrf = re.search(r'data-csrf="([^"]+)"', alice.client.get("/login").text).group(1)  # type: ignore[union-attr]
    start = alice.client.post("/api/login/passkey/options", data={"csrf_token": csrf}).json()
    signed = json.dumps(auth.assert_(unb64url(start["options"]["challenge"])))
    form = {"csrf_token": csrf, "ticket": start["ticket"], "credential": signed}
    login_cookie = alice.client.cookies.get("gk_login") or ""
    done = alice.client.post("/api/login/passkey", data=form)
    assert (
        done.status_code == 200 and done.json() == {"reviewer": "alice"} and "gk_session=" in done.headers["set-cookie"]
    )
    assert alice.client.get("/").status_code == 200
    again = Page(local)
    again.client.cookies.set("gk_login", login_cookie)  # everything the first log-in sent, sent again
    replayed = again.client.post("/api/login/passkey", data=form)
    assert replayed.status_code == 403 and "already used" in replayed.json()["error"]


def test_gatekeeper_review_reads_approve_with_from_the_policy(tmp_path: Path) -> None:
    """`gatekeeper review --policy` with approve_with: passkey: the page says so and refuses the password."""
    world = make_world(tmp_path / "w")
    with served(world, approve_with="passkey") as site:
        page = Page(site.base)
        assert page.login(password=TEST_PASSWORD).status_code == 303
        pid = world.propose("notes/p.md", b"p\n", verdict=None)
        html = page.client.get(f"/proposals/{pid}").text
        assert 'id="passkey-only"' in html and 'id="approve-password"' not in html
        ((sha,),) = world.db_rows("SELECT sha256 FROM proposal WHERE id = ?", pid)
        refused = page.approve(pid, sha, "notes/p.md", csrf=page.csrf(pid), password=TEST_PASSWORD)
        assert refused.status_code == 409 and "passkey only" in refused.text
    assert world.db_rows("SELECT count(*) FROM decision") == [(0,)]

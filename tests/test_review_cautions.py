"""Batch approval hides nothing the page warns about: a proposal with invisible or bidirectional
characters, a binary file or more than 64 KiB shows its warning in its queue row, and the server
refuses it in "Approve selected" (the challenge and the approval, whole, with an event), however the
request is made; it is approved from its own page. Over real HTTP (a `gatekeeper review` process at
localhost, a software passkey) and in Chromium."""

from __future__ import annotations

import html
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from gatekeeper.content.cautions import LARGE
from gatekeeper.home import Home
from gatekeeper.store import events as ev
from gatekeeper.store.store import Proposed, Store
from gatekeeper.trust.approval import unb64url
from tests.browser_support import logged_in_tab
from tests.helpers import draft
from tests.review_support import Page, decisions, event_count, hashed, review_server
from tests.test_passkeys_web import enrol_over_http
from tests.webauthn_authenticator import SoftAuthenticator

WARNED = {
    # The page counts the content and the arguments (which repeat it here): so does the row.
    "notes/zwsp.md": (b"ok\xe2\x80\x8bay\n", "1 invisible character in the content, 1 in the arguments: U+200B"),
    "notes/bidi.md": (
        "admin\u202e txt.exe\n".encode(),
        "1 invisible character in the content, 1 in the arguments, 2 of them bidirectional: U+202E",
    ),
    "notes/blob.bin": (b"\x89PNG\r\n\x1a\n\x00\xff", "binary: not UTF-8 text"),
    "notes/large.md": (b"x" * (LARGE + 1) + b"\n", "large: 66 KB (65,538 bytes), over 64 KiB"),
}


def propose_all(home: Home) -> tuple[list[Proposed], dict[str, Proposed]]:
    with Store(home.db_path) as store:
        plain = [store.propose(draft(f"notes/plain-{i}.md", f"plain {i}\n".encode())) for i in range(2)]
        warned = {path: store.propose(draft(path, content)) for path, (content, _) in WARNED.items()}
    return plain, warned


def row_of(queue: str, pid: str) -> str:
    found = re.search(rf"<tr class=\"status-pending\">(?:(?!</tr>).)*?/proposals/{pid}\".*?</tr>", queue, re.S)
    assert found is not None, pid
    return found.group(0)


def signed_proof(page: Page, auth: SoftAuthenticator, url: str, data: dict[str, Any]) -> dict[str, str]:
    start = page.client.post(url, data=data)
    assert start.status_code == 200, start.text
    body = start.json()
    signed = auth.assert_(unb64url(body["options"]["challenge"]))
    return {"nonce": body["nonce"], "digests": json.dumps(body["digests"]), "credential": json.dumps(signed)}


def item(p: Proposed, path: str) -> dict[str, str]:
    return {"id": p.id, "sha256": p.sha256, "path": path, "mode": "create"}


def refused_events(home: Home) -> list[tuple[str, dict[str, Any]]]:
    conn = sqlite3.connect(home.db_path)
    try:
        found = conn.execute(
            "SELECT proposal_id, payload FROM audit_event WHERE kind = ? ORDER BY seq", (ev.DECISION_REFUSED,)
        )
        return [(pid, json.loads(payload)) for pid, payload in found]
    finally:
        conn.close()


def test_warned_rows_say_so_and_approve_selected_refuses_them(home: Home) -> None:
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
    plain, warned = propose_all(home)
    with review_server(home) as base:
        local = base.replace("127.0.0.1", "localhost")  # passkeys work at localhost only
        page, auth = Page(local), SoftAuthenticator(origin=local)
        enrol_over_http(page, home, auth)
        assert page.login().status_code == 303
        queue = page.client.get("/").text
        for path, p in warned.items():
            row = html.unescape(row_of(queue, p.id))
            assert WARNED[path][1] in row and "open it to approve" in row, row
            assert 'class="pick"' not in row and "pick-refused" in row  # nothing to tick
        for p in plain:
            assert "caution" not in row_of(queue, p.id) and f'class="pick" value="{p.id}"' in queue

        csrf = page.csrf(plain[0].id)
        # The selection's challenge: refused whole before any passkey is asked, an event per warned row.
        mixed = [plain[0].id, warned["notes/zwsp.md"].id, warned["notes/blob.bin"].id]
        refused = page.client.post("/api/challenge", data={"csrf_token": csrf, "ids": mixed})
        assert refused.status_code == 409, refused.text
        said = refused.json()["error"]
        assert said.startswith("Nothing was approved: 2 of the 3 selected proposals carry warnings")
        assert f"notes/zwsp.md ({WARNED['notes/zwsp.md'][1]})" in said and "notes/blob.bin (binary" in said
        assert "approve it from its own page" in said
        events = refused_events(home)
        assert [pid for pid, _ in events] == mixed[1:]
        assert events[0][1]["why"] == "a batch approval would hide its warning: approve it from its own page"

        # A script that signs a warned proposal's own challenge and posts it as a selection: refused too.
        for path, p in warned.items():
            proof = signed_proof(page, auth, f"/api/proposals/{p.id}/challenge", {"csrf_token": csrf})
            items = json.dumps([item(p, path)])
            blind = page.client.post("/api/approve-selected", data={"csrf_token": csrf, "items": items, **proof})
            assert blind.status_code == 409 and path in blind.json()["error"], blind.text
        assert decisions(home) == []
        assert event_count(home, ev.DECISION_REFUSED) == 2 + len(warned)

        # The plain rows go together; a warned one from its own page, beside its warning.
        ids = [p.id for p in plain]
        proof = signed_proof(page, auth, "/api/challenge", {"csrf_token": csrf, "ids": ids})
        items = json.dumps([item(p, f"notes/plain-{i}.md") for i, p in enumerate(plain)])
        done = page.client.post("/api/approve-selected", data={"csrf_token": csrf, "items": items, **proof})
        assert done.status_code == 200 and done.json() == {"approved": ids}
        bidi = warned["notes/bidi.md"]
        assert "U+202E RIGHT-TO-LEFT OVERRIDE" in page.client.get(f"/proposals/{bidi.id}").text
        proof = signed_proof(page, auth, f"/api/proposals/{bidi.id}/challenge", {"csrf_token": csrf})
        own = {"csrf_token": csrf, "sha256": bidi.sha256, "path": "notes/bidi.md", "mode": "create", **proof}
        assert page.client.post(f"/api/proposals/{bidi.id}/approve", data=own).status_code == 200
    assert sorted(d[0] for d in decisions(home)) == sorted([*ids, bidi.id])


def test_the_queue_row_shows_the_warning_in_chromium(home: Home) -> None:
    with Store(home.db_path) as store:
        store.add_reviewer("alice", hashed())
        p = store.propose(draft("notes/bidi.md", WARNED["notes/bidi.md"][0]))
        q = store.propose(draft("notes/plain.md", b"plain\n"))
    shots = Path(__file__).resolve().parent.parent / "test-output" / "queue-cautions"
    with review_server(home) as base, logged_in_tab(base, shots) as tab:
        tab.goto(f"{base}/")
        caution = tab.locator(f"#caution-{p.id}")
        assert caution.is_visible()
        assert caution.inner_text() == f"⚠ {WARNED['notes/bidi.md'][1]}: open it to approve"
        assert tab.locator(f"#caution-{q.id}").count() == 0
        tab.screenshot(path=str(shots / "queue.png"), full_page=True)
        tab.click(f"#caution-{p.id} a")
        tab.wait_for_url(f"{base}/proposals/{p.id}")
        assert "U+202E" in tab.inner_text("#hidden-summary")
    assert (shots / "queue.png").stat().st_size > 1000

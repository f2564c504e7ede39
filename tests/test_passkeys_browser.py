"""Passkeys in Chromium with its own virtual authenticator (issue 14): enrol on the CLI's link, log
in with the passkey, approve one proposal and five at once from the queue, each committed by the
real committer; and the errors people hit (user not verified, no WebAuthn, 127.0.0.1, removed)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.commit_support import World, make_world, run_commit
from tests.passkey_browser_support import (
    enrol,
    enrolment_link,
    error_shown,
    gatekeeper,
    passkey_log_in,
    served,
    virtual_authenticator,
)
from tests.requirements import require_chromium
from tests.review_support import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path / "w")


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Path:
    folder = Path(__file__).resolve().parent.parent / "test-output" / request.node.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def decided(world: World) -> list[tuple[Any, ...]]:
    return world.db_rows("SELECT proposal_id, verdict, method, assertion_index FROM decision ORDER BY id")


def test_enrol_log_in_approve_one_then_five_all_committed(browser: Any, world: World, shots: Path) -> None:
    with served(world) as site:
        page = browser.new_page()
        virtual_authenticator(page)
        link = enrolment_link(world)
        assert link.startswith(f"{site.base}/enrol/")
        page.goto(link)
        assert page.inner_text("#enrol-reviewer") == "alice"
        page.screenshot(path=str(shots / "enrol.png"), full_page=True)
        enrol(page, link, label="work laptop")
        assert "work laptop" in page.inner_text("#enrol-done")
        page.screenshot(path=str(shots / "enrolled.png"), full_page=True)
        assert [r[0] for r in world.db_rows("SELECT label FROM passkey WHERE reviewer = 'alice'")] == ["work laptop"]

        passkey_log_in(page, site)
        assert page.inner_text("header .who") == "alice"

        one = world.propose("notes/one.md", b"signed by a passkey\n", verdict=None)
        page.goto(f"{site.base}/proposals/{one}")
        assert page.locator("#approve-password").count() == 0  # a passkey reviewer types no password
        assert "passkey signs this approval" in page.inner_text("#passkey-hint")
        page.screenshot(path=str(shots / "proposal.png"), full_page=True)
        page.click("#approve")
        page.wait_for_selector("#status:text('approved')", timeout=15_000)
        assert "approved" in page.inner_text("#decision")
        assert decided(world) == [(one, "approved", "passkey", 0)]
        assert run_commit(world).code == 0
        assert world.outcome(one)[0] == "created"  # type: ignore[index]
        assert (world.workspace / "notes" / "one.md").read_bytes() == b"signed by a passkey\n"

        five = [world.propose(f"notes/batch-{i}.md", f"batch {i}\n".encode(), verdict=None) for i in range(5)]
        page.goto(f"{site.base}/")
        assert page.locator("input.pick").count() == 5
        page.check("#pick-all")
        assert page.inner_text("#approve-selected") == "Approve 5 selected"
        page.screenshot(path=str(shots / "queue.png"), full_page=True)
        page.click("#approve-selected")
        page.wait_for_selector("#approved-notice", timeout=15_000)
        assert "Approved 5 proposals" in page.inner_text("#approved-notice")
        batch = decided(world)[1:]
        assert sorted(batch) == sorted((pid, "approved", "passkey", i) for i, pid in enumerate(reversed(five)))
        assert run_commit(world).code == 0
        assert [world.outcome(pid)[0] for pid in five] == ["created"] * 5  # type: ignore[index]
        assert (world.workspace / "notes" / "batch-3.md").read_bytes() == b"batch 3\n"
        page.close()
    for name in ("enrol.png", "proposal.png", "queue.png"):
        assert (shots / name).stat().st_size > 1000


def test_a_passkey_that_does_not_verify_the_user_approves_nothing(browser: Any, world: World) -> None:
    with served(world) as site:
        page = browser.new_page()
        cdp, authenticator = virtual_authenticator(page)
        enrol(page, enrolment_link(world))
        passkey_log_in(page, site)
        pid = world.propose("notes/uv.md", b"needs a verified user\n", verdict=None)
        cdp.send("WebAuthn.setUserVerified", {"authenticatorId": authenticator, "isUserVerified": False})
        page.goto(f"{site.base}/proposals/{pid}")
        page.click("#approve")
        message = error_shown(page)
        assert "could not verify you" in message and "Nothing was approved" in message
        assert page.inner_text("#status") == "pending"
        assert decided(world) == []
        page.close()


def test_clear_errors_no_webauthn_127_and_a_removed_passkey(browser: Any, world: World) -> None:
    with served(world) as site:
        bare = browser.new_page()
        bare.add_init_script("delete window.PublicKeyCredential;")
        bare.goto(enrolment_link(world))
        assert "this browser cannot use passkeys" in error_shown(bare).lower()
        assert bare.is_disabled("#enrol-button")
        bare.close()

        page = browser.new_page()
        virtual_authenticator(page)
        link = enrolment_link(world)
        page.goto(link.replace(site.base, site.ip_base))  # the link opened at 127.0.0.1
        assert "Passkeys work only at localhost" in page.inner_text("#localhost-needed")
        assert page.get_attribute("#localhost-link", "href") == link
        enrol(page, link)

        # A passkey reviewer who logs in with the password at 127.0.0.1 is sent to localhost.
        page.goto(f"{site.ip_base}/login")
        assert page.get_attribute("#localhost-link", "href") == f"{site.base}/login"
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", "alice's test passphrase")
        page.click("form.login button[type=submit]")
        assert page.get_attribute("#localhost-link", "href") == f"{site.base}/"

        ((credential,),) = world.db_rows("SELECT credential_id FROM passkey")
        assert gatekeeper(world, "reviewer", "passkey-remove", "alice", credential).returncode == 0
        page.goto(f"{site.base}/login")
        page.click("#passkey-login")
        assert "not enrolled here, or was removed" in error_shown(page)
        assert page.url == f"{site.base}/login"
        page.close()

"""The team's review page in Chromium over real TLS, at its public name (issue 15).

Chromium reaches ``https://review.test:PORT`` (the policy's review_url) through a host-resolver
rule, and trusts the server's key by its SPKI pin (a test CA cannot be added to its store here),
so the page is a secure context with no certificate error: WebAuthn works, and the passkey is for
rp id ``review.test``. A reviewer enrols on the link the CLI prints, logs in with the passkey,
approves; the committer, which reads the passkeys' origin from the same review_url, writes the file.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.commit_support import World, make_world, run_commit
from tests.passkey_browser_support import error_shown, gatekeeper, virtual_authenticator
from tests.requirements import require_chromium
from tests.review_support import CHROMIUM, CHROMIUM_ARGS
from tests.tls_support import Pki, make_pki, serve


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Path:
    folder = Path(__file__).resolve().parent.parent / "test-output" / request.node.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def browser(pki: Pki) -> Iterator[Any]:
    require_chromium()
    from playwright.sync_api import sync_playwright

    args = [
        *CHROMIUM_ARGS,
        "--host-resolver-rules=MAP review.test 127.0.0.1",
        f"--ignore-certificate-errors-spki-list={pki.spki}",
    ]
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=args)
        yield b
        b.close()


def test_passkey_log_in_and_approve_over_https_at_the_public_name(
    browser: Any, pki: Pki, tmp_path: Path, shots: Path
) -> None:
    world: World = make_world(tmp_path / "w")
    with serve(world, tls=pki) as site:
        done = gatekeeper(world, "reviewer", "enrol", "alice", "--policy", str(world.policy))
        assert done.returncode == 0, done.stderr
        link = done.stdout.strip().splitlines()[-1]
        assert link.startswith(f"{site.public}/enrol/"), done.stdout  # the public origin, not localhost

        page = browser.new_page()
        virtual_authenticator(page)
        page.goto(link)
        assert page.evaluate("window.isSecureContext") is True
        page.fill("#passkey-label", "team laptop")
        page.click("#enrol-button")
        page.wait_for_selector("#enrol-done:not([hidden])", timeout=15_000)

        page.goto(f"{site.public}/login")
        page.screenshot(path=str(shots / "login.png"), full_page=True)
        page.click("#passkey-login")
        page.wait_for_url(f"{site.public}/", timeout=15_000)
        assert page.inner_text("header .who") == "alice"
        cookies = {c["name"]: c for c in page.context.cookies()}
        assert cookies["__Host-gk_session"]["secure"] is True and "gk_session" not in cookies

        pid = world.propose("notes/team.md", b"approved at review.test\n", verdict=None)
        page.goto(f"{site.public}/proposals/{pid}")
        page.click("#approve")
        page.wait_for_selector("#status:text('approved')", timeout=15_000)
        page.screenshot(path=str(shots / "approved.png"), full_page=True)
        page.close()
    rows = world.db_rows("SELECT verdict, reviewer, method FROM decision WHERE proposal_id = ?", pid)
    assert rows == [("approved", "alice", "passkey")]
    run = run_commit(world)
    assert run.code == 0, run.err
    assert (world.workspace / "notes/team.md").read_bytes() == b"approved at review.test\n"


# The browser refusing the relying party (its SecurityError), as it does when the page is reached by
# a name the passkeys are not for: the hint must name the team's address, not "localhost".
REFUSE_RP = """
navigator.credentials.create = async () => {
  throw new DOMException("The relying party ID is not a registrable domain suffix of the origin.", "SecurityError");
};
"""


def test_a_security_error_names_the_public_review_origin(browser: Any, pki: Pki, tmp_path: Path, shots: Path) -> None:
    world: World = make_world(tmp_path / "w")
    with serve(world, tls=pki) as site:
        done = gatekeeper(world, "reviewer", "enrol", "alice", "--policy", str(world.policy))
        assert done.returncode == 0, done.stderr
        page = browser.new_page()
        page.add_init_script(REFUSE_RP)
        page.goto(done.stdout.strip().splitlines()[-1])
        page.fill("#passkey-label", "team laptop")
        page.click("#enrol-button")
        said = error_shown(page)
        page.screenshot(path=str(shots / "security-error.png"), full_page=True)
        page.close()
    assert said.startswith(f"Passkeys work only at {site.public}, the review page's own address"), said
    assert "localhost" not in said and "registrable domain suffix" in said, said

"""Passkeys in a real browser: the review page as ``gatekeeper review`` serves it (at
``http://localhost:PORT``, the policy's review_url), Chromium's own virtual authenticator (CDP
``WebAuthn.addVirtualAuthenticator``), and the steps a reviewer takes: enrol on the link the CLI
prints, log in with the passkey, approve."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from tests.commit_support import World
from tests.helpers import LAST_RESORT
from tests.process_support import stop
from tests.review_support import REPO, free_port


@dataclass(frozen=True)
class Served:
    port: int
    base: str  # http://localhost:PORT: where passkeys work
    ip_base: str  # http://127.0.0.1:PORT: password sessions only


def gatekeeper(world: World, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "gatekeeper", "--home", str(world.home.path), *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=60)


@contextmanager
def served(world: World, approve_with: str = "any") -> Iterator[Served]:
    """The review page for ``world``, its policy's review_url pointing at it (the committer reads
    the passkeys' origin from there too)."""
    port = free_port()
    text = re.sub(r"^(review_url|approve_with):.*\n", "", world.policy.read_text(), flags=re.M)
    head = f"version: 1\nreview_url: http://localhost:{port}\napprove_with: {approve_with}\n"
    world.policy.write_text(text.replace("version: 1\n", head, 1))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log = open(world.root / "review.log", "ab")  # noqa: SIM115 - closed below
    argv = [sys.executable, "-m", "gatekeeper", "--home", str(world.home.path), "review", "--port", str(port)]
    proc = subprocess.Popen([*argv, "--policy", str(world.policy)], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + LAST_RESORT
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/login", timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((world.root / "review.log").read_text()) from None
                time.sleep(0.1)
        yield Served(port, f"http://localhost:{port}", f"http://127.0.0.1:{port}")
    finally:
        stop(proc)
        log.close()


def virtual_authenticator(page: Any, *, verified: bool = True) -> tuple[Any, str]:
    """Chromium's virtual authenticator on ``page``: a platform passkey (ctap2, internal, resident
    keys) that verifies the user (PIN/biometrics) unless ``verified`` is False."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable", {"enableUI": False})
    options = {
        "protocol": "ctap2",
        "transport": "internal",
        "hasResidentKey": True,
        "hasUserVerification": True,
        "isUserVerified": verified,
        "automaticPresenceSimulation": True,
    }
    found = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": options})
    return cdp, str(found["authenticatorId"])


def enrolment_link(world: World) -> str:
    """The link `gatekeeper reviewer enrol alice` prints."""
    done = gatekeeper(world, "reviewer", "enrol", "alice", "--policy", str(world.policy))
    assert done.returncode == 0, done.stderr
    match = re.search(r"(http://localhost:\d+/enrol/\S+)", done.stdout)
    assert match is not None, done.stdout
    return match.group(1)


def enrol(page: Any, link: str, label: str = "laptop") -> None:
    page.goto(link)
    page.fill("#passkey-label", label)
    page.click("#enrol-button")
    page.wait_for_selector("#enrol-done:not([hidden])", timeout=15_000)


def passkey_log_in(page: Any, served: Served) -> None:
    page.goto(f"{served.base}/login")
    page.click("#passkey-login")
    page.wait_for_url(f"{served.base}/", timeout=15_000)


def error_shown(page: Any) -> str:
    page.wait_for_selector("#passkey-error:not([hidden])", timeout=15_000)
    return str(page.inner_text("#passkey-error"))

"""The review page for a team (issue 15): served over real TLS, or behind a trusted reverse proxy,
answering only the Host names and Origins it was told about.

Every server here is ``gatekeeper review`` as a real process; clients trust the test CA (never
``verify=False``). The public name ``review.test`` is reached by dialling localhost with that Host
header (the certificate names both), and the trusted proxy is a client dialling from 127.0.0.2.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization

from gatekeeper.cli import cli
from gatekeeper.errors import PolicyError
from gatekeeper.policy import load_policy
from gatekeeper.store.events import REQUEST_REFUSED
from tests.commit_support import World, make_world, run_commit
from tests.helpers import TEST_PASSWORD, line_queue, next_line
from tests.passkey_browser_support import gatekeeper
from tests.review_support import REPO, event_count, free_port
from tests.tls_support import Pki, Served, csrf_of, make_pki, serve, set_review_site, trusting

SECTION = "review:\n  hosts: ['alias.test:{port}']\n  origins: ['https://console.test']\n"


class Site(NamedTuple):
    world: World
    pki: Pki
    served: Served


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_site(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Site]:
    """One TLS server for the module: its policy's review_url is https://review.test:PORT."""
    world = make_world(tmp_path_factory.mktemp("tls") / "w")
    with serve(world, tls=pki, section=SECTION) as served:
        yield Site(world, pki, served)


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """Plain http on loopback behind a 'reverse proxy' at 127.0.0.2 (the only trusted peer); the
    policy's review_url is the proxy's https://review.test."""
    world = make_world(tmp_path_factory.mktemp("proxied") / "w")
    with serve(world, "--trusted-proxy", "127.0.0.2", tls=None, public="https://review.test") as served:
        yield Site(world, make_pki(world.root / "unused-pki"), served)


def client(site: Site, host: str | None = None, origin: str | None = None, **kw: Any) -> httpx.Client:
    """A same-origin browser tab at ``host`` (default: the public name), over TLS trusting the CA."""
    host = host or f"review.test:{site.served.port}"
    headers = {"Host": host, "Origin": origin or f"https://{host}", "Sec-Fetch-Site": "same-origin"}
    verify = trusting(site.pki) if site.served.local.startswith("https") else True
    return httpx.Client(base_url=site.served.local, headers=headers, verify=verify, follow_redirects=False, **kw)


def set_cookie(response: httpx.Response, name: str) -> str:
    """The Set-Cookie header for ``name`` (asserting there is one)."""
    found = [h for h in response.headers.get_list("set-cookie") if h.startswith(f"{name}=")]
    assert found, response.headers.get_list("set-cookie")
    return found[0]


def cookie_value(header: str) -> str:
    return header.split(";", 1)[0].split("=", 1)[1]


def log_in(c: httpx.Client, cookie: str = "__Host-gk_login", **headers: str) -> httpx.Response:
    """The log-in form and its post, the form's cookie sent by hand (a jar keeps Secure cookies off http)."""
    form = c.get("/login", headers=headers)
    assert form.status_code == 200, form.text
    sent = {"Cookie": f"{cookie}={cookie_value(set_cookie(form, cookie))}", **headers}
    data = {"username": "alice", "password": TEST_PASSWORD, "csrf_token": csrf_of(form.text)}
    return c.post("/login", data=data, headers=sent)


# -- TLS ------------------------------------------------------------------------------------------


def test_https_serves_and_plain_http_to_the_tls_port_fails(tls_site: Site) -> None:
    port = tls_site.served.port
    with client(tls_site) as c:
        page = c.get("/login")
    assert page.status_code == 200 and 'name="csrf_token"' in page.text
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://localhost:{port}/login", timeout=5)
    with pytest.raises(httpx.ConnectError):  # a client that does not trust the CA refuses the page
        httpx.get(f"https://localhost:{port}/login", timeout=5)


def test_cookies_are_secure_with_the_host_prefix_and_hsts_is_sent(tls_site: Site) -> None:
    with client(tls_site) as c:
        page = c.get("/login")
    cookie = set_cookie(page, "__Host-gk_login").lower()
    assert "; secure" in cookie and "; path=/" in cookie and "; httponly" in cookie and "samesite=strict" in cookie
    assert "domain=" not in cookie
    assert not [h for h in page.headers.get_list("set-cookie") if h.startswith("gk_login=")]
    assert page.headers["strict-transport-security"] == "max-age=31536000"
    # At localhost: still Secure, but no HSTS (it would pin every other localhost app to https).
    with client(tls_site, host=f"localhost:{tls_site.served.port}") as c:
        local = c.get("/login")
    assert "; secure" in set_cookie(local, "__Host-gk_login").lower()
    assert "strict-transport-security" not in local.headers


def test_log_in_approve_and_commit_over_tls(tls_site: Site) -> None:
    world = tls_site.world
    pid = world.propose("notes/over-tls.md", b"decided over https\n", verdict=None)
    with client(tls_site) as c:
        done = log_in(c)
        assert done.status_code == 303, done.text
        session = set_cookie(done, "__Host-gk_session")
        assert "; secure" in session.lower()
        c.cookies.set("__Host-gk_session", cookie_value(session))
        ((sha,),) = world.db_rows("SELECT sha256 FROM proposal WHERE id = ?", pid)
        csrf = csrf_of(c.get(f"/proposals/{pid}").text)
        form = {"sha256": sha, "path": "notes/over-tls.md", "password": TEST_PASSWORD, "csrf_token": csrf}
        approved = c.post(f"/proposals/{pid}/approve", data=form)
    assert approved.status_code == 303, approved.text
    assert world.db_rows("SELECT verdict, reviewer FROM decision WHERE proposal_id = ?", pid) == [("approved", "alice")]
    run = run_commit(world)
    assert run.code == 0, run.err
    assert (world.workspace / "notes/over-tls.md").read_bytes() == b"decided over https\n"


# -- Host and Origin allow-lists ----------------------------------------------------------------


@pytest.mark.parametrize("host", ["evil.test:{port}", "review.test", "review.test:1", "alias.test"])
def test_a_host_not_in_the_list_is_refused(tls_site: Site, host: str) -> None:
    before = event_count(tls_site.world.home, REQUEST_REFUSED)
    with client(tls_site, host=host.format(port=tls_site.served.port)) as c:
        refused = c.get("/login")
    assert refused.status_code == 400
    assert "is not this review page" in refused.text and "Traceback" not in refused.text
    assert not refused.headers.get_list("set-cookie")
    assert event_count(tls_site.world.home, REQUEST_REFUSED) == before + 1


def test_the_policy_s_extra_host_is_answered_and_points_passkeys_to_the_public_name(tls_site: Site) -> None:
    with client(tls_site, host=f"alias.test:{tls_site.served.port}") as c:
        page = c.get("/login")
    assert page.status_code == 200
    public = tls_site.served.public  # passkeys are for review.test: the page sends people there
    assert f'Passkeys work only at the public address: <a href="{public}/login"' in page.text, page.text
    with client(tls_site) as c:
        assert 'id="passkey-login"' in c.get("/login").text


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("https://evil.test", 403),
        ("http://review.test:{port}", 403),  # the right name over the wrong scheme
        ("null", 403),
        ("https://console.test", 303),  # the policy's review.origins
        ("https://review.test:{port}", 303),  # the page's own
    ],
)
def test_posts_from_an_origin_not_allowed_are_refused(tls_site: Site, origin: str, status: int) -> None:
    with client(tls_site, origin=origin.format(port=tls_site.served.port)) as c:
        done = log_in(c)
    assert done.status_code == status, done.text
    if status == 403:
        assert "is not allowed to change anything here" in done.text


def test_forwarded_headers_are_ignored_without_a_trusted_proxy(tls_site: Site) -> None:
    port = tls_site.served.port
    forged = {"X-Forwarded-Host": f"review.test:{port}", "X-Forwarded-Proto": "http"}
    with client(tls_site, host=f"evil.test:{port}") as c:
        assert c.get("/login", headers=forged).status_code == 400  # the forged name is not taken
    with client(tls_site) as c:
        page = c.get("/login", headers=forged)  # nor the forged downgrade
    assert "; secure" in set_cookie(page, "__Host-gk_login").lower()


# -- behind a reverse proxy -----------------------------------------------------------------------


def test_the_trusted_proxy_s_forwarded_proto_and_host_are_honoured(proxied: Site) -> None:
    port = proxied.served.port
    hops = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "review.test", "X-Forwarded-For": "203.0.113.9"}
    proxy = httpx.HTTPTransport(local_address="127.0.0.2")
    with client(proxied, host=f"127.0.0.1:{port}", origin="https://review.test", transport=proxy) as c:
        page = c.get("/login", headers=hops)
        assert page.status_code == 200
        assert "; secure" in set_cookie(page, "__Host-gk_login").lower()
        assert page.headers["strict-transport-security"] == "max-age=31536000"
        done = log_in(c, **hops)  # Origin https://review.test: the proxied page's own (no port)
        assert done.status_code == 303, done.text
        assert "; secure" in set_cookie(done, "__Host-gk_session").lower()
    with client(proxied, host=f"127.0.0.1:{port}", origin="http://review.test", transport=proxy) as c:
        assert log_in(c, **hops).status_code == 403  # Origin checks use https now


def test_forged_forwarded_headers_from_an_untrusted_peer_are_ignored(proxied: Site) -> None:
    port = proxied.served.port
    forged = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "review.test"}
    with client(proxied, host=f"127.0.0.1:{port}", origin=f"http://127.0.0.1:{port}") as c:  # from 127.0.0.1
        page = c.get("/login", headers=forged)
        assert page.status_code == 200
        cookie = set_cookie(page, "gk_login").lower()
        assert "; secure" not in cookie and "strict-transport-security" not in page.headers
        assert log_in(c, cookie="gk_login", **forged).status_code == 303  # plain http, plain cookies
    with client(proxied, host=f"evil.test:{port}") as c:
        assert c.get("/login", headers=forged).status_code == 400


def test_printed_links_use_the_public_review_url_and_work_through_the_proxy(
    proxied: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`review login-link` and `reviewer enrol` print links at the policy's public review_url (the
    page's loopback port means nothing to a teammate behind the proxy), and the log-in link works."""
    world, port = proxied.world, proxied.served.port
    monkeypatch.setenv("GATEKEEPER_POLICY", str(world.policy))  # as on the team's review machine
    policy = ("--policy", str(world.policy))
    login = gatekeeper(world, "review", "login-link", "alice")
    assert login.returncode == 0, login.stderr
    link = login.stdout.strip()
    assert link.startswith("https://review.test/login/link?token="), link
    explicit = gatekeeper(world, "review", "login-link", "alice", "--port", str(port), *policy)
    assert explicit.stdout.startswith("https://review.test/login/link?token="), explicit.stdout  # still public
    enrol = gatekeeper(world, "reviewer", "enrol", "alice", *policy)
    assert enrol.returncode == 0, enrol.stderr
    assert "give it to alice only" in enrol.stdout and "on this machine" not in enrol.stdout, enrol.stdout
    assert enrol.stdout.strip().splitlines()[-1].startswith("https://review.test/enrol/"), enrol.stdout
    hops = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "review.test"}
    proxy = httpx.HTTPTransport(local_address="127.0.0.2")
    with client(proxied, host=f"127.0.0.1:{port}", origin="https://review.test", transport=proxy) as c:
        done = c.get(link.removeprefix("https://review.test"), headers=hops)
    assert done.status_code == 303, done.text
    assert "; secure" in set_cookie(done, "__Host-gk_session").lower()


# -- refused before serving ---------------------------------------------------------------------


def review(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--home", str(home), "review", "--port", "1", *args])


@pytest.fixture
def home_path(tmp_path: Path) -> Path:
    return make_world(tmp_path / "w").home.path


def test_a_key_readable_by_others_is_refused(home_path: Path, pki: Pki, tmp_path: Path) -> None:
    key = tmp_path / "open-key.pem"
    key.write_bytes(pki.key.read_bytes())
    os.chmod(key, 0o644)
    result = review(home_path, "--tls-cert", str(pki.cert), "--tls-key", str(key))
    assert result.exit_code == 2, result.output
    assert "can be read by others (mode 0644)" in result.output and f"chmod 600 {key}" in result.output
    assert "Traceback" not in result.output


def test_a_key_of_another_certificate_is_refused(home_path: Path, pki: Pki) -> None:
    result = review(home_path, "--tls-cert", str(pki.cert), "--tls-key", str(pki.other_key))
    assert result.exit_code == 2, result.output
    assert "does not belong to the certificate" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("which", "said"),
    [
        ("cert", "is not a PEM certificate"),
        ("key", "is not a PEM private key"),
        ("encrypted", "is encrypted"),  # refused, not a passphrase prompt on the terminal
    ],
)
def test_tls_files_that_do_not_load_are_refused(
    home_path: Path, pki: Pki, tmp_path: Path, which: str, said: str
) -> None:
    bad = tmp_path / "bad.pem"
    if which == "encrypted":
        key = serialization.load_pem_private_key(pki.key.read_bytes(), password=None)
        pem = serialization.BestAvailableEncryption(b"a passphrase")
        bad.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, pem))
    else:
        bad.write_text("not PEM at all\n")
    os.chmod(bad, 0o600)
    cert, key_file = (bad, pki.key) if which == "cert" else (pki.cert, bad)
    result = review(home_path, "--tls-cert", str(cert), "--tls-key", str(key_file))
    assert result.exit_code == 2, result.output
    assert f"{bad} {said}" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--host", "0.0.0.0", "--allow-remote"], "without TLS: passwords"),
        (["--host", "192.0.2.10", "--allow-remote"], "--trusted-proxy ADDR"),
        (["--host", "0.0.0.0"], "for this machine only"),
        (["--trusted-proxy", "proxy.lan"], "is not an IP address or network"),
        (["--tls-cert", "{cert}"], "go together"),
    ],
)
def test_exposure_without_protection_is_refused(home_path: Path, pki: Pki, args: list[str], said: str) -> None:
    result = review(home_path, *(a.format(cert=pki.cert) for a in args))
    assert result.exit_code == 2, result.output
    assert said in result.output and "Traceback" not in result.output


# -- the policy's review section ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "key", "said"),
    [
        ("review:\n  hosts: ['https://review.test']\n", "review.hosts", "expected a host as a browser sends it"),
        ("review:\n  origins: ['review.test']\n", "review.origins", "expected an origin such as"),
        ("review:\n  origins: ['https://review.test/path']\n", "review.origins", "no path"),
        ("review:\n  host: ['review.test']\n", "review", "host"),
    ],
)
def test_review_section_errors_name_file_line_and_key(tmp_path: Path, section: str, key: str, said: str) -> None:
    world = make_world(tmp_path / "w")
    world.policy.write_text(world.policy.read_text().replace("version: 1\n", f"version: 1\n{section}", 1))
    with pytest.raises(PolicyError) as raised:
        load_policy(str(world.policy))
    message = str(raised.value)
    assert f"{world.policy.name}:" in message and key in message and said in message, message


def test_review_section_values_are_normalised(tmp_path: Path) -> None:
    world = make_world(tmp_path / "w")
    section = "review:\n  hosts: [Review.Test:8443]\n  origins: ['HTTPS://Review.Test:443/']\n"
    world.policy.write_text(world.policy.read_text().replace("version: 1\n", f"version: 1\n{section}", 1))
    policy = load_policy(str(world.policy))
    assert policy.review.hosts == ("review.test:8443",)
    assert policy.review.origins == ("https://review.test",)


# -- gatekeeper up ----------------------------------------------------------------------------------


def test_up_serves_the_page_over_tls_and_prints_links_at_the_public_origin(tmp_path: Path, pki: Pki) -> None:
    world, port = make_world(tmp_path / "w"), free_port()
    set_review_site(world, f"https://review.test:{port}")
    argv = [sys.executable, "-m", "gatekeeper", "--home", str(world.home.path), "up", "--port", str(port)]
    argv += ["--policy", str(world.policy), "--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert proc.stdout is not None
    lines = line_queue(proc.stdout)
    try:
        seen = [next_line(lines, 60, "gatekeeper up's output")]
        while "one-time link" not in seen[-1]:
            seen.append(next_line(lines, 60, "the log-in link"))
        assert f"Review page: https://review.test:{port}/\n" in seen, seen
        link = seen[-1].split(": ", 1)[1].strip()
        assert link.startswith(f"https://review.test:{port}/login/link?token="), link
        site = Site(world, pki, Served(port, link, f"https://localhost:{port}", proc))
        with client(site) as c:
            done = c.get(link.removeprefix(f"https://review.test:{port}"))
        assert done.status_code == 303, done.text
        assert "; secure" in set_cookie(done, "__Host-gk_session").lower()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

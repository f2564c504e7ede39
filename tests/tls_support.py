"""A throwaway PKI and the review page served over real TLS (or behind a pretend reverse proxy).

``make_pki``: a CA and a server certificate for ``review.test``, ``alias.test``, ``localhost`` and
127.0.0.1, made with ``cryptography``; clients trust the CA file (``httpx verify=``), never
``verify=False``. ``serve``: ``gatekeeper review`` as a real process for a ``World``, its policy's
``review_url`` (and ``review:`` section) pointing at the public name, ready when /login answers.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.commit_support import World
from tests.helpers import LAST_RESORT
from tests.process_support import stop
from tests.review_support import REPO, free_port

NAMES = ("review.test", "alias.test", "localhost")


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA certificate clients trust
    cert: Path  # the server's certificate (review.test, alias.test, localhost, 127.0.0.1)
    key: Path  # its key, mode 0600
    other_key: Path  # a key that belongs to no certificate here, mode 0600
    spki: str  # base64 sha256 of the server key's SubjectPublicKeyInfo (Chromium's pin format)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)


def make_pki(folder: Path) -> Pki:
    """A CA, and a server certificate it signed, valid from an hour ago for a day."""
    import base64
    import hashlib

    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Gatekeeper test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in NAMES]
    names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "review.test")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pki = Pki(folder / "ca.pem", folder / "cert.pem", folder / "key.pem", folder / "other-key.pem", "")
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + pki.ca.read_bytes())
    _write_key(pki.key, key)
    _write_key(pki.other_key, ec.generate_private_key(ec.SECP256R1()))
    spki = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return Pki(pki.ca, pki.cert, pki.key, pki.other_key, base64.b64encode(hashlib.sha256(spki).digest()).decode())


def trusting(pki: Pki) -> ssl.SSLContext:
    """A client context that trusts only the test CA."""
    return ssl.create_default_context(cafile=str(pki.ca))


@dataclass(frozen=True)
class Served:
    port: int
    public: str  # the policy's review_url, such as https://review.test:PORT
    local: str  # where the process listens, as a client dials it (https://localhost:PORT or http://127.0.0.1:PORT)
    proc: subprocess.Popen[bytes]


def set_review_site(world: World, review_url: str, section: str = "") -> None:
    """Point ``world``'s policy at ``review_url`` and give it a ``review:`` section (YAML text)."""
    text = re.sub(r"^(review_url|review):.*\n(  .*\n)*", "", world.policy.read_text(), flags=re.M)
    world.policy.write_text(text.replace("version: 1\n", f"version: 1\nreview_url: {review_url}\n{section}", 1))


@contextmanager
def serve(
    world: World, *args: str, tls: Pki | None, section: str = "", public: str = "https://review.test:{port}"
) -> Iterator[Served]:
    """``gatekeeper review`` for ``world`` with ``args``: over TLS when ``tls`` is given, else plain
    http (behind a pretend proxy); ``public`` is the policy's review_url and ``section`` its
    ``review:`` section (``{port}`` filled in, in both)."""
    port = free_port()
    public = public.format(port=port)
    set_review_site(world, public, section.format(port=port))
    tls_args = ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key)] if tls else []
    argv = [sys.executable, "-m", "gatekeeper", "--home", str(world.home.path), "review", "--port", str(port)]
    argv += ["--policy", str(world.policy), *tls_args, *args]
    log_path = world.root / "review.log"
    log = open(log_path, "ab")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(argv, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=log, stderr=log)
    local = f"https://localhost:{port}" if tls else f"http://127.0.0.1:{port}"
    verify: ssl.SSLContext | bool = trusting(tls) if tls else True
    try:
        deadline = time.monotonic() + LAST_RESORT
        while True:
            try:
                httpx.get(f"{local}/login", timeout=1, verify=verify)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(log_path.read_text()) from None
                time.sleep(0.1)
        yield Served(port, public, local, proc)
    finally:
        stop(proc)
        log.close()


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match is not None, html[:500]
    return match.group(1)

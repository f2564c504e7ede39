"""Checks on ``--tls-cert``/``--tls-key`` before the page serves, each a sentence a person can act on.

uvicorn would load them too, but its failures are tracebacks from inside the event loop, it asks
for an encrypted key's passphrase on the terminal, and it does not care who else can read the key.
Here: the key must be private to its owner (mode 0600, as ``secret.key``), the pair must load and
belong together, and the check loads them exactly as uvicorn will (``ssl.load_cert_chain``).
"""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm

from gatekeeper.errors import InvalidInput


def check_tls(cert: str, key: str) -> None:
    """Refuse a key readable by others, or a cert/key pair that does not load or does not match."""
    key_path, cert_path = Path(key), Path(cert)
    try:
        mode = stat.S_IMODE(key_path.stat().st_mode)
    except OSError as exc:
        raise InvalidInput(f"cannot read the TLS key {key}: {exc.strerror}", "check the path") from None
    if mode & 0o077:
        raise InvalidInput(
            f"the TLS key {key} can be read by others (mode {mode:04o}): whoever reads it can pose as this page",
            f"chmod 600 {key}",
        )
    try:
        _check_each(cert_path, key_path)
    except OSError as exc:
        raise InvalidInput(f"cannot read {exc.filename}: {exc.strerror}", "check the paths and permissions") from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert_path, key_path, password=_no_passphrase)
    except ssl.SSLError as exc:
        raise InvalidInput(*_explain(exc, cert, key)) from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {exc.filename or cert}: {exc.strerror}", "check the paths") from None


def _check_each(cert: Path, key: Path) -> None:
    """Which of the two files is wrong, and how: OpenSSL alone says only "PEM lib"."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        x509.load_pem_x509_certificates(cert.read_bytes())
    except ValueError:
        raise InvalidInput(
            f"the TLS certificate {cert} is not a PEM certificate", "give --tls-cert the PEM file (with its chain)"
        ) from None
    try:
        load_pem_private_key(key.read_bytes(), password=None)
    except TypeError:  # encrypted: uvicorn would ask for the passphrase on the terminal
        hint = f"give an unencrypted key: openssl pkey -in {key} -out NEW, then chmod 600 NEW"
        raise InvalidInput(f"the TLS key {key} is encrypted", hint) from None
    except (ValueError, UnsupportedAlgorithm):
        hint = "give --tls-key the certificate's private key (PEM)"
        raise InvalidInput(f"the TLS key {key} is not a PEM private key", hint) from None


def _no_passphrase() -> bytes:
    """An encrypted key gets an empty passphrase (and fails) instead of a prompt on the terminal."""
    return b""


def _explain(exc: ssl.SSLError, cert: str, key: str) -> tuple[str, str]:
    text = f"{exc.reason or ''} {exc}".upper()
    if "KEY_VALUES_MISMATCH" in text or "KEY VALUES MISMATCH" in text:
        return (
            f"the TLS key {key} does not belong to the certificate {cert}",
            "give the key the certificate was made for (openssl x509 -noout -pubkey -in CERT shows its public key)",
        )
    return (
        f"the TLS certificate {cert} and key {key} do not load ({exc.reason or exc})",
        "give a PEM certificate and its unencrypted PEM private key",
    )

"""Checks on ``--tls-cert``/``--tls-key`` before the page serves, each a sentence a person can act on.

uvicorn would load them too, but its failures are tracebacks from inside the event loop, it asks
for an encrypted key's passphrase on the terminal, and it does not care who else can read the key.
Here: the key must be private to its owner (mode 0600, as ``secret.key``), the pair must load and
belong together, and the check loads them exactly as uvicorn will (``ssl.load_cert_chain``).
"""

from __future__ import annotations

import os
import ssl
import stat
from pathlib import Path

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
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert_path, key_path, password=_no_passphrase)
    except ssl.SSLError as exc:
        raise InvalidInput(*_explain(exc, cert, key)) from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {exc.filename or cert}: {exc.strerror}", "check the paths") from None


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
    if "PEM" in text or "NO_START_LINE" in text or "ASN1" in text:
        which = cert if os.path.exists(cert) and "CERT" in text else f"{cert} or {key}"
        return (
            f"the TLS files do not load: {which} is not a PEM certificate / unencrypted PEM key ({exc.reason or exc})",
            "give --tls-cert a PEM certificate (with its chain) and --tls-key its private key, not encrypted",
        )
    return (
        f"the TLS certificate {cert} and key {key} do not load ({exc.reason or exc})",
        "give a PEM certificate and its unencrypted PEM private key",
    )

"""A software WebAuthn authenticator, for tests only.

It holds a real P-256 key (``cryptography``) and answers exactly as a browser hands the answers to
the page's JavaScript (``PublicKeyCredential.toJSON()``): registration with a 'none' attestation
object (CBOR: fmt, attStmt, authData with the attested credential and its COSE key), assertions
with authenticatorData, clientDataJSON and an ECDSA-SHA256 signature over
``authenticatorData || sha256(clientDataJSON)``. So the server side (py_webauthn) checks real
bytes, and a test can bend any one of them (flags, counter, origin, rp id) to prove a refusal.

The browser path itself (navigator.credentials in Chromium) is covered by the web tests with
Chromium's virtual authenticator (CDP ``WebAuthn.addVirtualAuthenticator``), not by this class.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from gatekeeper.trust.approval import b64url, unb64url

UP, UV, AT = 0x01, 0x04, 0x40


@dataclass
class SoftAuthenticator:
    """One credential on one authenticator. ``sign_count`` grows with each assertion (0 keeps it 0,
    as many platform authenticators do: set ``counting=False``)."""

    rp_id: str = "localhost"
    origin: str = "http://localhost:8765"
    counting: bool = True
    sign_count: int = 0
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    credential_id: bytes = field(default_factory=lambda: os.urandom(16))
    aaguid: bytes = bytes(16)

    @property
    def credential_b64(self) -> str:
        return b64url(self.credential_id)

    def cose_key(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")})

    def _auth_data(self, flags: int, rp_id: str | None, attested: bytes = b"") -> bytes:
        rp_hash = hashlib.sha256((rp_id or self.rp_id).encode()).digest()
        return rp_hash + bytes([flags]) + struct.pack(">I", self.sign_count) + attested

    @staticmethod
    def _client_data(kind: str, challenge: bytes, origin: str) -> bytes:
        # Chromium's serialisation: type, challenge, origin, crossOrigin, in this order, no spaces.
        return json.dumps(
            {"type": kind, "challenge": b64url(challenge), "origin": origin, "crossOrigin": False},
            separators=(",", ":"),
        ).encode()

    def register(self, challenge: bytes, *, uv: bool = True, origin: str | None = None) -> dict[str, Any]:
        """``navigator.credentials.create(...)`` answered, as ``toJSON()`` gives it."""
        attested = self.aaguid + struct.pack(">H", len(self.credential_id)) + self.credential_id + self.cose_key()
        auth_data = self._auth_data(UP | (UV if uv else 0) | AT, None, attested)
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        client = self._client_data("webauthn.create", challenge, origin or self.origin)
        return {
            "id": self.credential_b64,
            "rawId": self.credential_b64,
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client),
                "attestationObject": b64url(attestation),
                "transports": ["internal"],
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }

    def register_options(self, options_json: str, **kw: Any) -> dict[str, Any]:
        """Answer the server's creation options (JSON) as a browser would."""
        return self.register(unb64url(json.loads(options_json)["challenge"]), **kw)

    def assert_(
        self,
        challenge: bytes,
        *,
        uv: bool = True,
        up: bool = True,
        origin: str | None = None,
        rp_id: str | None = None,
        kind: str = "webauthn.get",
    ) -> dict[str, Any]:
        """``navigator.credentials.get(...)`` answered, as ``toJSON()`` gives it."""
        if self.counting:
            self.sign_count += 1
        auth_data = self._auth_data((UP if up else 0) | (UV if uv else 0), rp_id)
        client = self._client_data(kind, challenge, origin or self.origin)
        signature = self.key.sign(auth_data + hashlib.sha256(client).digest(), ec.ECDSA(hashes.SHA256()))
        return {
            "id": self.credential_b64,
            "rawId": self.credential_b64,
            "type": "public-key",
            "response": {
                "authenticatorData": b64url(auth_data),
                "clientDataJSON": b64url(client),
                "signature": b64url(signature),
                "userHandle": None,
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }

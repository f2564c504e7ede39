"""Approvals the reviewer signs with a passkey: what the authenticator signs, and checking it.

A stolen review cookie must not be enough to approve, so every passkey approval carries a WebAuthn
assertion whose challenge is the digest of the exact decision (``decision_digest``): proposal id,
mode, path, base and result sha256, verdict and a single-use server nonce. A batch of N approvals
signs ``batch_challenge`` over the N digests; each decision keeps the whole list and its index.

Domain only, no I/O: the store verifies inside the transaction that records the decision, the
committer and ``gatekeeper audit verify --approvals`` verify the stored row again. py_webauthn's
``verify_authentication_response`` does the signature, flag, origin, rp id and counter checks;
the same conditions are looked at first here only to say, in words a person understands, which
one failed (its own messages are for developers).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from gatekeeper.canonical import canonical_bytes, canonical_json, sha256_hex
from gatekeeper.errors import Conflict
from gatekeeper.origins import public_origin

PURPOSE = "gatekeeper.trust.approval.v1"
BATCH_PREFIX = b"gatekeeper.trust.approval.batch.v1"
RP_ID = "localhost"  # WebAuthn refuses an IP address as relying-party id
METHODS = ("passkey", "password")
APPROVE_WITH = ("any", "passkey")


class ApprovalRefused(Conflict):
    """An approval's proof does not hold. ``reason`` says which check failed, for the person and the event."""

    def __init__(self, reason: str, hint: str | None = None) -> None:
        super().__init__(reason, hint)
        self.reason = reason


@dataclass(frozen=True)
class Subject:
    """What an approval approves: the proposal's identity and bytes as stored."""

    proposal_id: str
    mode: str
    path: str
    base_sha256: str | None  # None for a create
    sha256: str  # the result


def decision_digest(subject: Subject, nonce: str) -> bytes:
    """D: sha256 of the canonical approval of ``subject`` under ``nonce`` (32 bytes)."""
    return hashlib.sha256(
        canonical_bytes(
            {
                "purpose": PURPOSE,
                "proposal_id": subject.proposal_id,
                "mode": subject.mode,
                "path": subject.path,
                "base_sha256": subject.base_sha256,
                "sha256": subject.sha256,
                "verdict": "approved",
                "nonce": nonce,
            }
        )
    ).digest()


def batch_challenge(digests: Sequence[bytes]) -> bytes:
    """The WebAuthn challenge for these decision digests: D itself for one, else a hash of the list."""
    if not digests:
        raise ValueError("an approval challenge needs at least one decision digest")
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256(BATCH_PREFIX + b"".join(digests)).digest()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: object) -> bytes:
    """base64url without padding, as WebAuthn writes it; ``ValueError`` when it is not that."""
    if not isinstance(text, str) or not text.isascii():
        raise ValueError("not base64url text")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not base64url text") from None


@dataclass(frozen=True)
class RelyingParty:
    """Who the passkeys are for: rp id ``localhost`` and the review page's origins."""

    rp_id: str
    origins: tuple[str, ...]

    @classmethod
    def for_review_url(cls, review_url: str, extra_origins: Sequence[str] = ()) -> RelyingParty:
        """The review page's relying party. On this machine (a loopback ``review_url``): rp id
        ``localhost``, its scheme and port kept. At a public name (a team's page, behind TLS or a
        proxy): that name, and the URL's origin, so page and committer agree on both."""
        parts = urlsplit(review_url)
        public = public_origin(review_url)
        if public is not None and parts.hostname:
            return cls(parts.hostname, (public, *extra_origins))
        port = f":{parts.port}" if parts.port else ""
        return cls(RP_ID, (f"{parts.scheme}://{RP_ID}{port}", *extra_origins))


@dataclass(frozen=True)
class Assertion:
    """A WebAuthn assertion as stored with a decision: the browser's fields, base64url."""

    credential_id: str
    authenticator_data: str
    client_data_json: str
    signature: str
    user_handle: str | None = None

    def to_json(self) -> str:
        return canonical_json(asdict(self))

    def sha256(self) -> str:
        """The digest the decision's HMAC signs (of ``to_json``)."""
        return sha256_hex(self.to_json().encode("utf-8"))

    @classmethod
    def from_json(cls, text: str) -> Assertion:
        """Read ``to_json``'s output back; ``ApprovalRefused`` when it is not that."""
        try:
            obj = json.loads(text)
        except ValueError:
            raise ApprovalRefused("the stored assertion is not JSON") from None
        if not isinstance(obj, dict) or set(obj) != {f for f in cls.__dataclass_fields__}:
            raise ApprovalRefused("the stored assertion does not have the fields of an assertion")
        return cls._checked(obj)

    @classmethod
    def from_credential(cls, credential: Mapping[str, Any]) -> Assertion:
        """From the browser's ``PublicKeyCredential.toJSON()`` of ``navigator.credentials.get``."""
        response = credential.get("response")
        if not isinstance(response, Mapping) or credential.get("type") != "public-key":
            raise ApprovalRefused(
                "the approval did not carry a passkey assertion", "approve again and use your passkey when asked"
            )
        return cls._checked(
            {
                "credential_id": credential.get("id"),
                "authenticator_data": response.get("authenticatorData"),
                "client_data_json": response.get("clientDataJSON"),
                "signature": response.get("signature"),
                "user_handle": response.get("userHandle") or None,
            }
        )

    @classmethod
    def _checked(cls, obj: Mapping[str, Any]) -> Assertion:
        fields: dict[str, str | None] = {}
        for name in cls.__dataclass_fields__:
            value = obj.get(name)
            if value is None and name == "user_handle":
                fields[name] = None
                continue
            try:
                unb64url(value)
            except ValueError:
                raise ApprovalRefused(f"the assertion's {name} is missing or not base64url") from None
            fields[name] = value
        return cls(
            credential_id=str(fields["credential_id"]),
            authenticator_data=str(fields["authenticator_data"]),
            client_data_json=str(fields["client_data_json"]),
            signature=str(fields["signature"]),
            user_handle=fields["user_handle"],
        )

    def credential(self) -> dict[str, Any]:
        """The shape py_webauthn reads (the browser's JSON)."""
        response = {
            "authenticatorData": self.authenticator_data,
            "clientDataJSON": self.client_data_json,
            "signature": self.signature,
        }
        if self.user_handle is not None:
            response["userHandle"] = self.user_handle
        return {"id": self.credential_id, "rawId": self.credential_id, "type": "public-key", "response": response}


@dataclass(frozen=True)
class StoredPasskey:
    """A passkey row, as verification needs it."""

    credential_id: str
    reviewer: str
    public_key: bytes  # COSE_Key
    sign_count: int
    label: str
    created_at: str
    removed_at: str | None = None


@dataclass(frozen=True)
class Proof:
    """A passkey approval's proof, as posted and as stored with each decision it covers."""

    nonce: str
    assertion: Assertion
    index: int
    digests: tuple[str, ...]  # hex decision digests, the list the challenge hashed


def verify_approval(
    subject: Subject,
    reviewer: str,
    proof: Proof,
    passkey: StoredPasskey | None,
    rp: RelyingParty,
    *,
    decided_at: str,
    check_counter: bool,
) -> int:
    """Check that ``proof`` is ``reviewer``'s passkey approving exactly ``subject``; return the new sign count.

    ``check_counter``: at approval time the counter must grow; a later re-check cannot ask that
    (the counter has moved on since). Raises ``ApprovalRefused`` naming the failed check.
    """
    if passkey is None:
        raise ApprovalRefused(
            "the assertion was made with a passkey that is not enrolled here", "enrol it with a link from the CLI"
        )
    if passkey.reviewer != reviewer:
        raise ApprovalRefused(f"the assertion was made with a passkey of another reviewer ({passkey.reviewer})")
    if passkey.removed_at is not None and passkey.removed_at <= decided_at:
        raise ApprovalRefused(
            f"the passkey {passkey.label!r} was removed at {passkey.removed_at}", "approve with another passkey"
        )
    if not 0 <= proof.index < len(proof.digests):
        raise ApprovalRefused(f"the assertion covers {len(proof.digests)} decision(s), not a place {proof.index}")
    if proof.digests[proof.index] != decision_digest(subject, proof.nonce).hex():
        raise ApprovalRefused(
            "this assertion was made for another proposal (or another version of this one)",
            "reload the proposal page and approve what it shows now",
        )
    try:
        challenge = batch_challenge([bytes.fromhex(d) for d in proof.digests])
    except ValueError:
        raise ApprovalRefused("the assertion's list of decision digests is not hex") from None
    current = passkey.sign_count if check_counter else 0
    return verify_assertion(proof.assertion, challenge=challenge, passkey=passkey, rp=rp, current_count=current)


def verify_assertion(
    assertion: Assertion, *, challenge: bytes, passkey: StoredPasskey, rp: RelyingParty, current_count: int
) -> int:
    """The WebAuthn checks (py_webauthn's), each failure in words; the new sign count."""
    if assertion.credential_id != passkey.credential_id:
        raise ApprovalRefused("the assertion names another passkey than the one it is checked against")
    client = _client_data(assertion)
    if client.type != "webauthn.get":
        raise ApprovalRefused(f"the assertion is not a sign-in assertion (its type is {client.type!r})")
    if client.challenge != challenge:
        raise ApprovalRefused(
            "the assertion signs another challenge than this approval's",
            "reload the proposal page and approve what it shows now",
        )
    if client.origin not in rp.origins:
        raise ApprovalRefused(
            f"the assertion was made on {client.origin}, not on the review page ({' or '.join(rp.origins)})",
            f"open the review page at {rp.origins[0]}",
        )
    data = _authenticator_data(assertion)
    if data.rp_id_hash != hashlib.sha256(rp.rp_id.encode("utf-8")).digest():
        raise ApprovalRefused(f"the assertion was made for another site than {rp.rp_id!r}")
    if not data.flags.up:
        raise ApprovalRefused("the passkey did not check that you were present (user presence is required)")
    if not data.flags.uv:
        raise ApprovalRefused(
            "the passkey did not verify the user (user verification is required)",
            "use an authenticator that asks for your PIN, fingerprint or face",
        )
    if (data.sign_count or current_count) and data.sign_count <= current_count:
        raise ApprovalRefused(
            f"the passkey's signature counter did not increase ({data.sign_count} after {current_count}): "
            "the passkey may have been cloned, or the assertion replayed"
        )
    from webauthn import verify_authentication_response  # here: the store imports this module, the proxy the store
    from webauthn.helpers.exceptions import InvalidAuthenticationResponse

    try:
        verified = verify_authentication_response(
            credential=assertion.credential(),
            expected_challenge=challenge,
            expected_rp_id=rp.rp_id,
            expected_origin=list(rp.origins),
            credential_public_key=passkey.public_key,
            credential_current_sign_count=current_count,
            require_user_verification=True,
        )
    except InvalidAuthenticationResponse:
        raise ApprovalRefused(f"the assertion's signature does not verify with the passkey {passkey.label!r}") from None
    except Exception:  # a malformed COSE key or signature: py_webauthn raises what its parsers raise
        raise ApprovalRefused(f"the assertion could not be checked against the passkey {passkey.label!r}") from None
    return int(verified.new_sign_count)


def _client_data(assertion: Assertion) -> Any:
    from webauthn.helpers import parse_client_data_json

    try:
        return parse_client_data_json(unb64url(assertion.client_data_json))
    except Exception:
        raise ApprovalRefused("the assertion's client data is not WebAuthn client data") from None


def _authenticator_data(assertion: Assertion) -> Any:
    from webauthn.helpers import parse_authenticator_data

    try:
        return parse_authenticator_data(unb64url(assertion.authenticator_data))
    except Exception:
        raise ApprovalRefused("the assertion's authenticator data is malformed") from None

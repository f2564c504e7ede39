"""Enrolling a passkey (WebAuthn registration), and the options a browser needs for both ceremonies.

Domain only, no I/O. The enrolment link's token is one-time (the store redeems it once), so the
registration challenge is derived from it: the page that holds the link can make the passkey,
nothing else can, and a replayed registration fails on the used token. py_webauthn's
``verify_registration_response`` checks the attestation (format, COSE key, flags, rp id, origin).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_registration_response,
)
from webauthn.helpers.exceptions import InvalidRegistrationResponse
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from gatekeeper.errors import Conflict
from gatekeeper.trust.approval import RelyingParty, b64url, unb64url

ENROL_PURPOSE = b"gatekeeper.enrol.v1"
RP_NAME = "Gatekeeper"


class EnrolmentRefused(Conflict):
    """A registration response that does not hold; the message says which check failed."""


@dataclass(frozen=True)
class NewPasskey:
    """A verified registration, ready for the passkey table."""

    credential_id: str  # base64url
    public_key: bytes  # COSE_Key
    sign_count: int
    aaguid: str
    transports: tuple[str, ...]


def enrolment_challenge(token: str) -> bytes:
    """The registration challenge for the enrolment link with this token."""
    return hashlib.sha256(ENROL_PURPOSE + token.encode("utf-8")).digest()


def user_handle(reviewer: str) -> bytes:
    """A stable WebAuthn user id for a reviewer (not their name: user ids must carry no personal data)."""
    return hashlib.sha256(b"gatekeeper.reviewer.v1" + reviewer.encode("utf-8")).digest()


def registration_options(rp: RelyingParty, reviewer: str, token: str, existing: Sequence[str] = ()) -> str:
    """JSON for ``PublicKeyCredential.parseCreationOptionsFromJSON`` (user verification required)."""
    options = generate_registration_options(
        rp_id=rp.rp_id,
        rp_name=RP_NAME,
        user_name=reviewer,
        user_id=user_handle(reviewer),
        challenge=enrolment_challenge(token),
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
        exclude_credentials=[PublicKeyCredentialDescriptor(id=unb64url(c)) for c in existing],
    )
    return options_to_json(options)


def authentication_options(rp: RelyingParty, challenge: bytes, credential_ids: Sequence[str]) -> str:
    """JSON for ``PublicKeyCredential.parseRequestOptionsFromJSON``: this challenge, these passkeys, UV required."""
    options = generate_authentication_options(
        rp_id=rp.rp_id,
        challenge=challenge,
        allow_credentials=[PublicKeyCredentialDescriptor(id=unb64url(c)) for c in credential_ids],
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    return options_to_json(options)


def verify_registration(credential: Mapping[str, Any] | str, token: str, rp: RelyingParty) -> NewPasskey:
    """Check the browser's ``navigator.credentials.create`` answer for the link ``token``."""
    try:
        obj = json.loads(credential) if isinstance(credential, str) else dict(credential)
    except ValueError:
        raise EnrolmentRefused("the passkey registration is not JSON") from None
    try:
        verified = verify_registration_response(
            credential=obj,
            expected_challenge=enrolment_challenge(token),
            expected_rp_id=rp.rp_id,
            expected_origin=list(rp.origins),
            require_user_presence=True,
            require_user_verification=True,
        )
    except InvalidRegistrationResponse as exc:
        raise EnrolmentRefused(
            f"the passkey could not be enrolled: {exc}",
            f"open the enrolment link at {rp.origins[0]}, in a browser with passkeys, and verify yourself",
        ) from None
    except Exception:  # py_webauthn's parsers raise their own errors on malformed input
        raise EnrolmentRefused("the passkey registration is malformed") from None
    transports = obj.get("response", {}).get("transports") or []
    return NewPasskey(
        credential_id=b64url(verified.credential_id),
        public_key=verified.credential_public_key,
        sign_count=verified.sign_count,
        aaguid=verified.aaguid,
        transports=tuple(str(t) for t in transports if isinstance(t, str)),
    )

"""Passkey test helpers: enrol a software authenticator through the real ceremony, and approve with it
exactly as the review page will (challenge from the store, assertion from the authenticator)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from gatekeeper.home import Home
from gatekeeper.store.passkeys import Challenge
from gatekeeper.store.proofs import ApprovalRules
from gatekeeper.store.store import Proposed, Store
from gatekeeper.store.tx import Event
from gatekeeper.trust.approval import Assertion, Proof, RelyingParty
from gatekeeper.trust.enrolment import registration_options, verify_registration
from tests.webauthn_authenticator import SoftAuthenticator

RP = RelyingParty.for_review_url("http://127.0.0.1:8765")  # origin http://localhost:8765, rp id localhost
RULES = ApprovalRules(RP, "any")
PASSKEY_ONLY = ApprovalRules(RP, "passkey")


def enrol(store: Store, reviewer: str = "alice", label: str = "test key") -> SoftAuthenticator:
    """A new authenticator, registered on a one-time link of ``reviewer`` (who must exist)."""
    auth = SoftAuthenticator(origin=RP.origins[0])
    token = store.issue_enrolment(reviewer)
    credential = auth.register_options(registration_options(RP, reviewer, token))
    store.redeem_enrolment(token, verify_registration(credential, token, RP), label)
    return auth


def sign(auth: SoftAuthenticator, challenge: Challenge, index: int = 0, **bend: Any) -> Proof:
    """The authenticator's assertion over ``challenge`` (``bend``: flags, origin, rp id... as a test needs)."""
    assertion = Assertion.from_credential(auth.assert_(challenge.challenge, **bend))
    return Proof(challenge.nonce, assertion, index, challenge.digests)


def approve(
    store: Store, home: Home, p: Proposed, path: str, proof: Proof, reviewer: str = "alice", **kw: Any
) -> Event:
    return store.decide(
        p.id,
        verdict="approved",
        reviewer=reviewer,
        sha256=p.sha256,
        path=path,
        proof=proof,
        rules=kw.pop("rules", RULES),
        **kw,
    )


def rows(home: Home, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(home.db_path)
    try:
        return conn.execute(sql, tuple(params)).fetchall()
    finally:
        conn.close()

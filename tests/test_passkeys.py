"""Passkey-signed approvals in the store (issue 14): enrolment, one approval, a batch, and every
refusal (each an ``approval_refused`` event, nothing decided). The software authenticator builds
real WebAuthn bytes; the browser ceremony is the web tests' (Chromium's virtual authenticator)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from gatekeeper.canonical import canonical_bytes, sha256_hex
from gatekeeper.errors import Conflict
from gatekeeper.home import Home
from gatekeeper.store import events as ev
from gatekeeper.store.decisions import Shown
from gatekeeper.store.proofs import PasswordProof
from gatekeeper.store.store import Proposed, Store
from gatekeeper.trust.approval import (
    ApprovalRefused,
    Assertion,
    Proof,
    Subject,
    b64url,
    batch_challenge,
    decision_digest,
    unb64url,
)
from gatekeeper.trust.enrolment import EnrolmentRefused, registration_options, verify_registration
from tests.helpers import PROOF, add_reviewer, draft
from tests.passkey_support import PASSKEY_ONLY, RP, RULES, approve, enrol, rows, sign
from tests.review_support import Page, decisions, event_count, hashed, review_app
from tests.webauthn_authenticator import SoftAuthenticator

PATH = "notes/a.md"


@pytest.fixture
def alice(store: Store) -> SoftAuthenticator:
    add_reviewer(store)
    return enrol(store)


def test_enrol_then_approve_one(home: Home, store: Store, alice: SoftAuthenticator) -> None:
    (added,) = rows(home, "SELECT payload FROM audit_event WHERE kind = ?", [ev.PASSKEY_ADDED])
    assert json.loads(added[0])["credential_id"] == alice.credential_b64
    p = store.propose(draft())
    challenge = store.issue_challenge("alice", [p.id])
    assert challenge.challenge == decision_digest(Subject(p.id, "create", PATH, None, p.sha256), challenge.nonce)
    event = approve(store, home, p, PATH, sign(alice, challenge))
    assert json.loads(event.payload)["method"] == "passkey"
    ((method, nonce, assertion, index, digests, decided_at, signature),) = rows(
        home, "SELECT method, nonce, assertion, assertion_index, assertion_digests, decided_at, signature FROM decision"
    )
    assert (method, nonce, index, json.loads(digests)) == ("passkey", challenge.nonce, 0, list(challenge.digests))
    assert Assertion.from_json(assertion).credential_id == alice.credential_b64
    # The Ed25519 signature covers method, nonce and the assertion's digest (the message written out by
    # hand here, as the signing code must build it): strip or swap any of them and it fails.
    ((server, tool, workspace, real, kid),) = rows(
        home, "SELECT p.server, p.tool, p.workspace, p.workspace_real, d.key_id FROM proposal p JOIN decision d"
    )
    message = {
        "purpose": "gatekeeper.decision.v2",
        "key_id": kid,
        **dict(proposal_id=p.id, verdict="approved", reviewer="alice", reason=None, sha256=p.sha256, path=PATH),
        **dict(server=server, tool=tool, workspace=workspace, workspace_real=real),
        **dict(decided_at=decided_at, mode="create", base_sha256=None),
        **dict(method="passkey", nonce=nonce, assertion_sha256=sha256_hex(assertion.encode())),
    }
    keyring = home.keys.keyring()
    assert keyring.verify(kid, canonical_bytes(message), signature)
    for stripped in ("method", "nonce", "assertion_sha256"):
        assert not keyring.verify(kid, canonical_bytes({**message, stripped: None}), signature)
    assert rows(home, "SELECT sign_count FROM passkey") == [(1,)]
    assert rows(home, "SELECT used_at IS NOT NULL FROM approval_challenge") == [(1,)]


def test_a_batch_of_five_with_one_assertion(home: Home, store: Store, alice: SoftAuthenticator) -> None:
    proposed = [store.propose(draft(f"notes/{i}.md", f"{i}\n".encode())) for i in range(5)]
    challenge = store.issue_challenge("alice", [p.id for p in proposed])
    proof = sign(alice, challenge)
    shown = [Shown(p.id, p.sha256, f"notes/{i}.md") for i, p in enumerate(proposed)]
    events = store.approve_batch(shown, reviewer="alice", proof=proof, rules=RULES)
    assert len(events) == 5
    stored = rows(home, "SELECT proposal_id, assertion_index, assertion, nonce FROM decision ORDER BY assertion_index")
    assert [(r[0], r[1]) for r in stored] == [(p.id, i) for i, p in enumerate(proposed)]
    assert len({r[2] for r in stored}) == 1 and {r[3] for r in stored} == {challenge.nonce}


def test_enrolment_links_work_once(store: Store) -> None:
    add_reviewer(store)
    auth = SoftAuthenticator(origin=RP.origins[0])
    token = store.issue_enrolment("alice")
    assert store.enrolment_reviewer(token) == "alice"
    credential = auth.register_options(registration_options(RP, "alice", token))
    new = verify_registration(credential, token, RP)
    store.redeem_enrolment(token, new, "first")
    assert store.enrolment_reviewer(token) is None
    with pytest.raises(Conflict, match="already used"):
        store.redeem_enrolment(token, new, "again")
    other = store.issue_enrolment("alice")
    with pytest.raises(EnrolmentRefused, match="challenge"):  # a registration made for another link
        verify_registration(credential, other, RP)
    with pytest.raises(EnrolmentRefused, match=r"[Uu]ser verification"):
        verify_registration(
            SoftAuthenticator().register_options(registration_options(RP, "alice", other), uv=False), other, RP
        )
    assert [p.label for p in store.passkeys("alice")] == ["first"]


# -- refusals: each an approval_refused event, nothing decided ------------------------------------

Attempt = Callable[[Store, Home, SoftAuthenticator, Proposed], Any]


def _replayed(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    """The assertion of a batch [q, p] used for p after q spent its nonce. The authenticator keeps its
    counter at 0 (many platform authenticators do), so only the spent nonce can refuse it."""
    auth.counting = False
    q = store.propose(draft("notes/q.md", b"q\n"))
    proof = sign(auth, store.issue_challenge("alice", [q.id, p.id]))
    approve(store, home, q, "notes/q.md", proof)  # index 0: q, the nonce is spent
    return approve(store, home, p, PATH, Proof(proof.nonce, proof.assertion, 1, proof.digests))


def _other_proposal(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    q = store.propose(draft("notes/q.md", b"q\n"))
    return approve(store, home, p, PATH, sign(auth, store.issue_challenge("alice", [q.id])))


def _tampered_signature(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    proof = sign(auth, store.issue_challenge("alice", [p.id]))
    raw = bytearray(unb64url(proof.assertion.signature))
    raw[-1] ^= 1
    bad = Assertion(**{**proof.assertion.__dict__, "signature": b64url(bytes(raw))})
    return approve(store, home, p, PATH, Proof(proof.nonce, bad, 0, proof.digests))


def _other_challenge(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    challenge = store.issue_challenge("alice", [p.id])
    assertion = Assertion.from_credential(auth.assert_(b"\x00" * 32))
    return approve(store, home, p, PATH, Proof(challenge.nonce, assertion, 0, challenge.digests))


def _counter_not_increasing(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    q = store.propose(draft("notes/q.md", b"q\n"))
    approve(store, home, q, "notes/q.md", sign(auth, store.issue_challenge("alice", [q.id])))  # count 1 stored
    auth.sign_count = 0  # a cloned authenticator, a step behind
    return approve(store, home, p, PATH, sign(auth, store.issue_challenge("alice", [p.id])))


def _another_reviewers_passkey(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    add_reviewer(store, "bob")
    bobs = enrol(store, "bob")
    return approve(store, home, p, PATH, sign(bobs, store.issue_challenge("alice", [p.id])))


def _challenge_of_another_reviewer(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    add_reviewer(store, "bob")
    return approve(store, home, p, PATH, sign(auth, store.issue_challenge("bob", [p.id])))


def _expired_challenge(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    return approve(store, home, p, PATH, sign(auth, store.issue_challenge("alice", [p.id], ttl=timedelta(0))))


def _digests_not_issued(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    """A digest list of one's own making around the issued nonce (p and q, though only p was issued)."""
    q = store.propose(draft("notes/q.md", b"q\n"))
    issued = store.issue_challenge("alice", [p.id])
    ds = [
        decision_digest(Subject(x.id, "create", path, None, x.sha256), issued.nonce)
        for x, path in ((p, PATH), (q, "notes/q.md"))
    ]
    assertion = Assertion.from_credential(auth.assert_(batch_challenge(ds)))
    return approve(store, home, p, PATH, Proof(issued.nonce, assertion, 0, tuple(d.hex() for d in ds)))


def _removed_passkey(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    store.remove_passkey("alice", auth.credential_b64)
    return approve(store, home, p, PATH, sign(auth, store.issue_challenge("alice", [p.id])))


def _bent(**bend: Any) -> Attempt:
    def attempt(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
        return approve(store, home, p, PATH, sign(auth, store.issue_challenge("alice", [p.id]), **bend))

    return attempt


def _password_under_passkey_only(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    add_reviewer(store, "carol")  # no passkey: under approve_with any the password would do
    return approve(store, home, p, PATH, PROOF, reviewer="carol", rules=PASSKEY_ONLY)  # type: ignore[arg-type]


def _password_with_a_passkey(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    return approve(store, home, p, PATH, PROOF)  # type: ignore[arg-type]


def _wrong_password(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    add_reviewer(store, "carol")
    return approve(store, home, p, PATH, PasswordProof("not it"), reviewer="carol")  # type: ignore[arg-type]


def _cookie_only(store: Store, home: Home, auth: SoftAuthenticator, p: Proposed) -> Any:
    return approve(store, home, p, PATH, None)  # type: ignore[arg-type]


REFUSALS: dict[str, tuple[Attempt, str]] = {
    "replayed": (_replayed, "already used .* replayed"),
    "other proposal": (_other_proposal, "made for another proposal"),
    "tampered signature": (_tampered_signature, "signature does not verify"),
    "other challenge": (_other_challenge, "signs another challenge"),
    "other origin": (_bent(origin="http://localhost:9999"), "made on http://localhost:9999"),
    "other rp id": (_bent(rp_id="evil.example"), "another site than 'localhost'"),
    "counter": (_counter_not_increasing, "counter did not increase"),
    "another reviewer's passkey": (_another_reviewers_passkey, "passkey of another reviewer"),
    "removed passkey": (_removed_passkey, "was removed at"),
    "challenge of another reviewer": (_challenge_of_another_reviewer, "issued to another reviewer"),
    "expired challenge": (_expired_challenge, "challenge expired"),
    "digests not issued": (_digests_not_issued, "other decisions than its challenge was issued for"),
    "no user verification": (_bent(uv=False), r"did not verify the user \(user verification is required\)"),
    "no user presence": (_bent(up=False), "present"),
    "not a get assertion": (_bent(kind="webauthn.create"), "not a sign-in assertion"),
    "password under approve_with passkey": (_password_under_passkey_only, "passkey only"),
    "password by a passkey reviewer": (_password_with_a_passkey, "has a passkey: approve with it"),
    "wrong password": (_wrong_password, "password .* is not right"),
    "cookie only": (_cookie_only, "session alone is not enough"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refused_with_an_event_and_nothing_decided(
    home: Home, store: Store, alice: SoftAuthenticator, case: str
) -> None:
    attempt, reason = REFUSALS[case]
    p = store.propose(draft())
    with pytest.raises(ApprovalRefused, match=reason):
        attempt(store, home, alice, p)
    assert rows(home, "SELECT 1 FROM decision WHERE proposal_id = ?", [p.id]) == []
    ((payload,),) = rows(
        home, "SELECT payload FROM audit_event WHERE kind = ? AND proposal_id = ?", [ev.APPROVAL_REFUSED, p.id]
    )
    assert json.loads(payload)["reviewer"] in ("alice", "carol")
    assert json.loads(payload)["why"]


def test_a_rejection_needs_only_the_session(home: Home, store: Store, alice: SoftAuthenticator) -> None:
    p = store.propose(draft())
    store.decide(p.id, verdict="rejected", reason="no", reviewer="alice", sha256=p.sha256, path=PATH)
    assert rows(home, "SELECT verdict, method FROM decision") == [("rejected", None)]


def test_the_page_refuses_an_approval_with_the_cookie_alone(home: Home, store: Store) -> None:
    """A logged-in session (the stolen-cookie case) posts approve with the CSRF token but without the
    password: refused, an approval_refused event, nothing decided; with the password it goes through."""
    store.add_reviewer("alice", hashed())
    p = store.propose(draft())
    with review_app(home) as site:
        page = Page(site)
        assert page.login().status_code == 303
        refused = page.approve(p.id, p.sha256, PATH, page.csrf(p.id), password="")
        assert refused.status_code == 409 and "session alone is not enough" in refused.text
        assert decisions(home) == [] and event_count(home, ev.APPROVAL_REFUSED) == 1
        wrong = page.approve(p.id, p.sha256, PATH, page.csrf(p.id), password="guess" * 3)
        assert wrong.status_code == 409 and decisions(home) == []
        assert page.approve(p.id, p.sha256, PATH, page.csrf(p.id)).status_code == 303
    assert rows(home, "SELECT verdict, method FROM decision") == [("approved", "password")]


def test_step_up_passwords_count_against_the_log_in_throttle(home: Home, store: Store) -> None:
    """A stolen cookie buys no unlimited guesses: after 5 wrong step-up passwords even the right one
    waits (429), and nothing is decided."""
    store.add_reviewer("alice", hashed())
    p = store.propose(draft())
    with review_app(home) as site:
        page = Page(site)
        assert page.login().status_code == 303
        for _ in range(5):
            assert page.approve(p.id, p.sha256, PATH, page.csrf(p.id), password="guess" * 3).status_code == 409
        throttled = page.approve(p.id, p.sha256, PATH, page.csrf(p.id))
        assert throttled.status_code == 429 and "Too many wrong passwords" in throttled.text
    assert decisions(home) == []


def test_a_sign_in_counter_only_moves_forward(store: Store, alice: SoftAuthenticator) -> None:
    assert store.bump_sign_count(alice.credential_b64, 3)
    assert not store.bump_sign_count(alice.credential_b64, 3)  # not greater: a replay or a clone
    assert not store.bump_sign_count(alice.credential_b64, 2)
    assert [p.sign_count for p in store.passkeys("alice")] == [3]
    store.remove_passkey("alice", alice.credential_b64)
    assert not store.bump_sign_count(alice.credential_b64, 4)

"""The proof an approval carries, checked inside the transaction that records the decision.

A review session cookie can leak (browsers do not scope cookies by port on loopback), so the
session alone never approves: a passkey reviewer's approval carries a WebAuthn assertion over the
exact decision (``gatekeeper.trust.approval``), a password reviewer's the password typed again. The
nonce is spent and the passkey's counter moved in the same transaction as the decision rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gatekeeper.canonical import now_ts
from gatekeeper.store import events as ev
from gatekeeper.store.signed_rows import passkey_refusal
from gatekeeper.store.tx import Tx
from gatekeeper.trust.approval import (
    ApprovalRefused,
    Proof,
    RelyingParty,
    StoredPasskey,
    Subject,
    verify_approval,
)

if TYPE_CHECKING:
    from gatekeeper.policy import Policy
    from gatekeeper.trust.keys import KeyRing

WRONG_PASSWORD = "the password typed for this approval is not right"


@dataclass(frozen=True)
class PasswordProof:
    """The reviewer's password, typed again for this approval (never stored or logged)."""

    password: str = field(repr=False)


@dataclass(frozen=True)
class PasswordCheck:
    """The step-up password checked against ``password_hash`` before the transaction (argon2 is
    slow: not under the write lock); the transaction then requires the hash to be unchanged."""

    password_hash: str | None
    ok: bool


@dataclass(frozen=True)
class ApprovalRules:
    """What an approval must carry. ``rp``: the review page's relying party (None: passkey approvals
    cannot be checked, so refused). ``approve_with``: the policy's 'any' or 'passkey'. ``policy``: for
    reviewers' scopes and a rule's ``approvals`` (None: no scopes, one approval; ``store/quorum.py``)."""

    rp: RelyingParty | None = None
    approve_with: str = "any"
    policy: Policy | None = None


@dataclass(frozen=True)
class Checked:
    """A proof that held: what each decision row stores, and what to spend once they are written."""

    method: str  # 'passkey' | 'password'
    proof: Proof | None = None
    credential_id: str | None = None
    new_sign_count: int | None = None

    def columns(self, index: int) -> dict[str, object]:
        """The decision's proof columns for the ``index``-th approval of the batch."""
        if self.proof is None:
            return {"method": self.method}
        return {
            "method": self.method,
            "nonce": self.proof.nonce,
            "assertion": self.proof.assertion.to_json(),
            "assertion_index": index,
            "assertion_digests": json.dumps(list(self.proof.digests)),
        }


def check_proof(
    tx: Tx,
    reviewer: str,
    subjects: Sequence[tuple[int, Subject]],
    proof: Proof | PasswordCheck | None,
    rules: ApprovalRules,
    keyring: KeyRing,
) -> Checked:
    """Raise ``ApprovalRefused`` unless ``proof`` is ``reviewer``'s approval of exactly ``subjects``,
    each the given index of the passkey proof's digest list."""
    if proof is None:
        raise ApprovalRefused(
            "an approval needs your passkey or your password again: the session alone is not enough",
            "approve from the proposal page",
        )
    if isinstance(proof, PasswordCheck):
        return _check_password(tx, reviewer, proof, rules, len(subjects))
    if rules.rp is None:
        raise ApprovalRefused("this review page cannot check passkey approvals (it does not know its own origin)")
    now = now_ts()
    _check_challenge(tx, reviewer, proof, now)
    passkey = passkey_by_credential(tx, proof.assertion.credential_id)
    why = None if passkey is None else passkey_refusal(tx, keyring, passkey.credential_id)
    if passkey is not None and why is not None:
        payload = {"reviewer": passkey.reviewer, "credential_id": passkey.credential_id, "why": why}
        tx.append_event(ev.REVIEWER_ROW_REFUSED, f"reviewer:{reviewer}", payload)  # commits with the refusal
        raise ApprovalRefused(
            f"the passkey {passkey.label!r} does not hold: {why}",
            "remove it and enrol it again with a link from `gatekeeper reviewer enrol`",
        )
    counts = {
        verify_approval(
            subject,
            reviewer,
            Proof(proof.nonce, proof.assertion, index, proof.digests),
            passkey,
            rules.rp,
            decided_at=now,
            check_counter=True,
        )
        for index, subject in subjects
    }
    assert passkey is not None  # verify_approval refuses an unknown credential
    return Checked("passkey", proof, passkey.credential_id, max(counts))


def spend(tx: Tx, checked: Checked) -> None:
    """Once the decisions are written: the nonce is used, the passkey's counter moves forward."""
    if checked.proof is None:
        return
    tx.run("UPDATE approval_challenge SET used_at = ? WHERE nonce = ?", (now_ts(), checked.proof.nonce))
    tx.run(
        "UPDATE passkey SET sign_count = ? WHERE credential_id = ? AND sign_count < ?",
        (checked.new_sign_count, checked.credential_id, checked.new_sign_count),
    )


def passkey_by_credential(tx: Tx, credential_id: str) -> StoredPasskey | None:
    row = tx.first(
        "SELECT credential_id, reviewer, public_key, sign_count, label, created_at, removed_at FROM passkey "
        "WHERE credential_id = ?",
        (credential_id,),
    )
    return None if row is None else StoredPasskey(row[0], row[1], bytes(row[2]), *row[3:])


def has_passkey(tx: Tx, reviewer: str) -> bool:
    return tx.first("SELECT 1 FROM passkey WHERE reviewer = ? AND removed_at IS NULL", (reviewer,)) is not None


def _check_password(tx: Tx, reviewer: str, check: PasswordCheck, rules: ApprovalRules, count: int) -> Checked:
    if rules.approve_with == "passkey":
        raise ApprovalRefused(
            "this Gatekeeper accepts approvals signed with a passkey only (policy: approve_with: passkey)",
            "enrol a passkey: `gatekeeper reviewer enrol NAME` prints a link",
        )
    if count != 1:
        raise ApprovalRefused("approving several proposals at once needs a passkey", "approve them one by one")
    if has_passkey(tx, reviewer):
        raise ApprovalRefused(f"reviewer {reviewer} has a passkey: approve with it, not with the password")
    if not check.ok:
        raise ApprovalRefused(WRONG_PASSWORD, "type your password again")
    row = tx.first("SELECT password_hash FROM reviewer WHERE name = ?", (reviewer,))
    if row is None or row[0] != check.password_hash:
        raise ApprovalRefused("the password was changed while approving", "log in again and approve")
    return Checked("password")


def _check_challenge(tx: Tx, reviewer: str, proof: Proof, now: str) -> None:
    row = tx.first(
        "SELECT reviewer, digests, expires_at, used_at FROM approval_challenge WHERE nonce = ?", (proof.nonce,)
    )
    if row is None:
        raise ApprovalRefused("the approval's challenge was not issued here", "reload the page and approve again")
    if row[3] is not None:
        raise ApprovalRefused(
            f"this assertion's challenge was already used at {row[3]} (a replayed approval)",
            "reload the page and approve again",
        )
    if row[0] != reviewer:
        raise ApprovalRefused("the approval's challenge was issued to another reviewer")
    if row[2] <= now:
        raise ApprovalRefused(f"the approval's challenge expired at {row[2]}", "approve again")
    if tuple(json.loads(row[1])) != proof.digests:
        raise ApprovalRefused("the assertion covers other decisions than its challenge was issued for")

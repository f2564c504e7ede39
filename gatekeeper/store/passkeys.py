"""Passkeys: one-time enrolment links, reviewers' credentials, and the nonces approvals answer.

No HTTP and no WebAuthn parsing here (``gatekeeper.trust.enrolment`` and ``gatekeeper.trust.approval`` do
that): these are the rows and their audit events. An enrolment token is stored only as its
sha256, so a copy of the database cannot enrol a passkey.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from gatekeeper import humane
from gatekeeper.canonical import format_ts, now_ts, sha256_hex, utc_now
from gatekeeper.errors import Conflict, InvalidInput, NotFound
from gatekeeper.store import cautioned
from gatekeeper.store import events as ev
from gatekeeper.store.decisions import already_decided
from gatekeeper.store.proofs import passkey_by_credential
from gatekeeper.store.signed_rows import PASSKEY_COLUMNS, next_seq, passkey_problem, passkey_signed
from gatekeeper.store.tx import Event, Transactions, Tx
from gatekeeper.trust.approval import StoredPasskey, Subject, batch_challenge, decision_digest
from gatekeeper.trust.row_marks import remember

if TYPE_CHECKING:  # the WebAuthn ceremony module imports webauthn, which the proxy never needs
    from gatekeeper.trust.enrolment import NewPasskey

ENROLMENT_TTL = timedelta(hours=24)
CHALLENGE_TTL = timedelta(minutes=5)
MAX_OPEN_CHALLENGES = 8
"""Approvals one reviewer may have waiting for a passkey at once. Each approve click (a proposal's page,
or the queue's batch) opens one, used at once when the passkey answers; one the person cancels stays
open for ``CHALLENGE_TTL``. A person with a few tabs and a cancelled prompt or two stays well below
8; a script asking again and again meets it at the 9th."""
PRUNE_AFTER = CHALLENGE_TTL  # an expired challenge is kept this much longer before it is deleted
MAX_LABEL = 80


@dataclass(frozen=True)
class Challenge:
    """An approval attempt's challenge: ask the authenticator to sign ``challenge`` (bytes), then post
    back ``nonce`` and ``digests`` with the assertion (``approval.Proof``)."""

    nonce: str
    reviewer: str
    digests: tuple[str, ...]  # hex, one per proposal, in the order asked for
    challenge: bytes
    expires_at: str


class Passkeys(Transactions):
    """The ``passkey``, ``passkey_enrolment`` and ``approval_challenge`` tables."""

    # -- enrolment -----------------------------------------------------------------------------

    def issue_enrolment(self, reviewer: str, actor: str = "cli", ttl: timedelta = ENROLMENT_TTL) -> str:
        """A one-time enrolment token for an enabled reviewer (the link is ``/enrol/<token>``)."""
        token = secrets.token_urlsafe(32)
        with self.transaction() as tx:
            _enabled(tx, reviewer)
            expires = format_ts(utc_now() + ttl)
            row = {"token_sha256": sha256_hex(token.encode()), "reviewer": reviewer, "created_at": now_ts()}
            tx.insert("passkey_enrolment", {**row, "expires_at": expires})
            tx.append_event(ev.PASSKEY_ENROLMENT_ISSUED, actor, {"reviewer": reviewer, "expires_at": expires})
        return token

    def enrolment_reviewer(self, token: str) -> str | None:
        """Whose enrolment link this is, while it is unused and unexpired (else None)."""
        with self.transaction() as tx:
            row = _live_enrolment(tx, token)
        return None if row is None else str(row[0])

    def redeem_enrolment(self, token: str, new: NewPasskey, label: str, actor: str | None = None) -> Event:
        """Spend the token and add the verified passkey to its reviewer, with a ``passkey_added`` event."""
        label = " ".join(label.split())[:MAX_LABEL] or "passkey"
        signer = self.signer()
        with self.transaction() as tx:
            row = _live_enrolment(tx, token)
            if row is None:
                raise Conflict(
                    "this enrolment link was already used, has expired, or was never issued",
                    "ask for a new one: `gatekeeper reviewer enrol NAME`",
                )
            reviewer = str(row[0])
            _enabled(tx, reviewer)
            if passkey_by_credential(tx, new.credential_id) is not None:
                raise Conflict("this passkey is already enrolled", "use it, or enrol another authenticator")
            tx.run(
                "UPDATE passkey_enrolment SET used_at = ? WHERE token_sha256 = ?",
                (now_ts(), sha256_hex(token.encode())),
            )
            at = now_ts()
            signed = passkey_signed(signer, next_seq(tx), reviewer, new.credential_id, new.public_key, at, None)
            tx.insert(
                "passkey",
                {
                    "reviewer": reviewer,
                    "credential_id": new.credential_id,
                    "public_key": new.public_key,
                    "sign_count": new.sign_count,
                    "aaguid": new.aaguid,
                    "transports": json.dumps(list(new.transports)),
                    "label": label,
                    "created_at": at,
                    **signed,
                },
            )
            payload = {"reviewer": reviewer, "credential_id": new.credential_id, "label": label, "aaguid": new.aaguid}
            payload |= signed
            event = tx.append_event(ev.PASSKEY_ADDED, actor or f"reviewer:{reviewer}", payload)
        remember(self.keys_dir, "passkey", new.credential_id, event.seq)
        return event

    # -- credentials ---------------------------------------------------------------------------

    def passkeys(self, reviewer: str, *, removed: bool = False) -> list[StoredPasskey]:
        """A reviewer's passkeys, oldest first; the removed ones too if ``removed``."""
        with self.transaction() as tx:
            rows = tx.all(
                "SELECT credential_id FROM passkey WHERE reviewer = ? AND (? OR removed_at IS NULL) ORDER BY id",
                (reviewer, removed),
            )
            found = [passkey_by_credential(tx, r[0]) for r in rows]
        return [p for p in found if p is not None]

    def passkey(self, credential_id: str) -> StoredPasskey | None:
        """The passkey, if its row is signed by the review side's key for its latest change (else as if
        unknown, and a row that is there but does not hold is a ``reviewer_row_refused`` event)."""
        keyring = self.keyring()
        with self.transaction() as tx:
            row = tx.first(f"SELECT {PASSKEY_COLUMNS} FROM passkey WHERE credential_id = ?", (credential_id,))
            if row is None:
                return None
            why = passkey_problem(tx.first, keyring, row)
            if why is None:
                return passkey_by_credential(tx, credential_id)
            payload = {"reviewer": row[0], "credential_id": credential_id, "why": why}
            tx.append_event(ev.REVIEWER_ROW_REFUSED, "review", payload)
        return None

    def remove_passkey(self, reviewer: str, credential_id: str, actor: str = "cli") -> Event:
        """Remove a passkey for good: approvals made with it before stay valid, later ones are refused."""
        signer = self.signer()
        with self.transaction() as tx:
            found = passkey_by_credential(tx, credential_id)
            if found is None or found.reviewer != reviewer:
                raise NotFound(
                    f"reviewer {reviewer!r} has no passkey {credential_id!r}",
                    f"`gatekeeper reviewer passkeys {reviewer}` lists them",
                )
            if found.removed_at is not None:
                raise Conflict(f"that passkey was already removed at {found.removed_at}")
            at = now_ts()
            signed = passkey_signed(
                signer, next_seq(tx), reviewer, credential_id, found.public_key, found.created_at, at
            )
            tx.run(
                "UPDATE passkey SET removed_at = :at, key_id = :key_id, signature = :signature "
                "WHERE credential_id = :c",
                {"at": at, "c": credential_id, **signed},
            )
            payload = {"reviewer": reviewer, "credential_id": credential_id, "label": found.label, **signed}
            event = tx.append_event(ev.PASSKEY_REMOVED, actor, payload)
        remember(self.keys_dir, "passkey", credential_id, event.seq)  # the row put back is refused from now on
        return event

    def bump_sign_count(self, credential_id: str, sign_count: int) -> bool:
        """After a verified sign-in assertion: move the counter forward. False when it did not grow
        (a replay, or a cloned authenticator): the caller refuses the sign-in then."""
        with self.transaction() as tx:
            row = tx.first(
                "SELECT sign_count FROM passkey WHERE credential_id = ? AND removed_at IS NULL", (credential_id,)
            )
            if row is None or ((sign_count or row[0]) and sign_count <= row[0]):
                return False
            tx.run("UPDATE passkey SET sign_count = ? WHERE credential_id = ?", (sign_count, credential_id))
        return True

    # -- approval challenges -------------------------------------------------------------------

    def issue_challenge(
        self, reviewer: str, proposal_ids: Sequence[str], ttl: timedelta = CHALLENGE_TTL, *, batch: bool = False
    ) -> Challenge:
        """A fresh nonce for ``reviewer`` approving these pending proposals, and the digests it binds.

        ``batch``: for the queue's selection, which refuses a proposal with a warning before any passkey
        is asked (``approve_batch`` refuses it again: this is for the person, that is the rule).
        ``TooManyChallenges`` once ``MAX_OPEN_CHALLENGES`` are open (issued, unused, unexpired): a
        session alone (a stolen cookie and the page's CSRF token) gets as far as a challenge, so
        without a cap it could add rows as fast as it liked. Expired rows are pruned here too."""
        if not proposal_ids or len(set(proposal_ids)) != len(proposal_ids):
            raise InvalidInput("name each proposal to approve once", "select at least one proposal")
        if batch:
            with self.transaction() as tx:
                warned = cautioned.refuse_batch(tx, proposal_ids, reviewer, f"reviewer:{reviewer}")
            if warned is not None:
                raise warned
        nonce = secrets.token_urlsafe(24)
        with self.transaction() as tx:
            _enabled(tx, reviewer)
            _prune_challenges(tx)
            now = now_ts()
            open_, oldest = tx.first(
                "SELECT count(*), min(expires_at) FROM approval_challenge "
                "WHERE reviewer = ? AND used_at IS NULL AND expires_at > ?",
                (reviewer, now),
            ) or (0, None)
            if open_ >= MAX_OPEN_CHALLENGES:
                raise TooManyChallenges(reviewer, open_, str(oldest))
            digests = tuple(decision_digest(_pending(tx, pid), nonce).hex() for pid in proposal_ids)
            expires = format_ts(utc_now() + ttl)
            row = {"nonce": nonce, "reviewer": reviewer, "digests": json.dumps(list(digests)), "created_at": now}
            tx.insert("approval_challenge", {**row, "expires_at": expires})
        challenge = batch_challenge([bytes.fromhex(d) for d in digests])
        return Challenge(nonce, reviewer, digests, challenge, expires)


class TooManyChallenges(Conflict):
    """``reviewer`` has ``open`` approvals waiting for a passkey already; the oldest expires at ``oldest``."""

    def __init__(self, reviewer: str, open_: int, oldest: str) -> None:
        super().__init__(
            f"{open_} approvals are already waiting for {reviewer}'s passkey, the most there may be",
            f"approve again once the oldest expires ({humane.ago(oldest)}); if you did not start them, "
            "someone else may be using your session: log out and in again",
        )
        self.reviewer, self.open, self.oldest = reviewer, open_, oldest


def _prune_challenges(tx: Tx) -> None:
    """Delete challenges expired more than ``PRUNE_AFTER`` ago (migration 0011 lets only expired rows
    go, by the database's clock: the grace covers a skew; a larger one only leaves them for later)."""
    tx.run("SAVEPOINT prune")
    try:
        tx.run("DELETE FROM approval_challenge WHERE expires_at < ?", (format_ts(utc_now() - PRUNE_AFTER),))
    except tx.integrity_errors:
        tx.run("ROLLBACK TO SAVEPOINT prune")
    tx.run("RELEASE SAVEPOINT prune")


def _enabled(tx: Tx, reviewer: str) -> None:
    row = tx.first("SELECT disabled_at FROM reviewer WHERE name = ?", (reviewer,))
    if row is None or row[0] is not None:
        raise NotFound(f"no enabled reviewer {reviewer!r}", "`gatekeeper reviewer list` shows them")


def _live_enrolment(tx: Tx, token: str) -> tuple[object, ...] | None:
    return tx.first(
        "SELECT reviewer FROM passkey_enrolment WHERE token_sha256 = ? AND used_at IS NULL AND expires_at > ?",
        (sha256_hex(token.encode()), now_ts()),
    )


def _pending(tx: Tx, proposal_id: str) -> Subject:
    row = tx.first(
        "SELECT p.mode, p.path, p.base_sha256, p.sha256, p.expires_at, d.id FROM proposal p "
        "LEFT JOIN decision d ON d.proposal_id = p.id WHERE p.id = ?",
        (proposal_id,),
    )
    if row is None:
        raise NotFound(f"no proposal {proposal_id}")
    if row[5] is not None:
        raise already_decided(tx, proposal_id) or Conflict(f"proposal {proposal_id} is already decided")
    if row[4] <= now_ts():
        raise Conflict(f"proposal {proposal_id} expired at {row[4]}", "ask the agent to propose again")
    return Subject(proposal_id, row[0], row[1], row[2], row[3])

"""Decisions: approve or reject exactly the proposal the reviewer saw, and for an approval, with
the proof a session cookie cannot produce (``proofs``): a passkey assertion or the password again.

Everything is one BEGIN IMMEDIATE transaction: the checks, the decision rows, their events, the
spent nonce and the passkey's counter. A refusal writes only its event (``decision_refused`` for
what the page posted, ``approval_refused`` for a proof that did not hold) and decides nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gatekeeper import humane
from gatekeeper.canonical import now_ts
from gatekeeper.errors import Conflict, InvalidInput, NotFound
from gatekeeper.store import cautioned, quorum
from gatekeeper.store import events as ev
from gatekeeper.store.bounded import bounded
from gatekeeper.store.proofs import ApprovalRules, Checked, PasswordCheck, PasswordProof, check_proof, spend
from gatekeeper.store.signed_rows import reviewer_refusal
from gatekeeper.store.tx import Event, Transactions, Tx
from gatekeeper.store.values import VERDICTS
from gatekeeper.trust import signing
from gatekeeper.trust.approval import ApprovalRefused, Proof, Subject

if TYPE_CHECKING:
    from gatekeeper.trust.keys import KeyRing, Signer

MAX_BATCH = 50  # proposals approved with one assertion
ANY = ApprovalRules()  # approve_with: any, and no relying party (passkey approvals refused)


@dataclass(frozen=True)
class Shown:
    """What the reviewer's page showed and posted back for one proposal (mode and base: None if not posted)."""

    proposal_id: str
    sha256: str
    path: str
    mode: str | None = None
    base_sha256: str | None = None


@dataclass(frozen=True)
class Posted:
    """A decision as posted, checked against the stored proposal before it is signed."""

    proposal_id: str
    verdict: str
    reviewer: str
    sha256: str
    path: str
    reason: str | None
    mode: str | None = None  # None: not posted (a create's page may leave it out)
    base_sha256: str | None = None


class Decisions(Transactions):
    """The ``decision`` table, with its events and the approval proof."""

    def decide(
        self,
        proposal_id: str,
        *,
        verdict: str,
        reviewer: str,
        sha256: str,
        path: str,
        reason: str | None = None,
        actor: str | None = None,
        mode: str | None = None,
        base_sha256: str | None = None,
        proof: Proof | PasswordProof | None = None,
        rules: ApprovalRules = ANY,
    ) -> Event:
        """Approve or reject exactly the proposal the reviewer saw: its path and result sha256,
        and for a change its mode and base sha256 too (a create's page may leave those out).

        An approval needs ``proof``: a passkey ``Proof`` (its ``index`` in its digest list), or a
        ``PasswordProof`` where ``rules.approve_with`` is 'any' and the reviewer has no passkey.
        A rejection needs none. Every refusal is an audit event and then a ``Conflict`` (an
        ``ApprovalRefused`` for the proof) / ``NotFound`` / ``InvalidInput``.
        """
        shown = Shown(proposal_id, sha256, path, mode, base_sha256)
        index = proof.index if isinstance(proof, Proof) else 0
        return self._decide([(index, shown)], verdict, reviewer, reason, actor, proof, rules)[0]

    def approve_batch(
        self,
        shown: Sequence[Shown],
        *,
        reviewer: str,
        proof: Proof,
        rules: ApprovalRules,
        actor: str | None = None,
    ) -> list[Event]:
        """Approve several proposals with one assertion, all or none: ``shown[i]`` is the proof's
        digest ``i`` (``proof.index`` is ignored), and each decision stores its own index. A proposal
        with a warning (``gatekeeper.content.cautions``) refuses the whole batch, with an event for it."""
        if not 0 < len(shown) <= MAX_BATCH:
            raise InvalidInput(f"approve between 1 and {MAX_BATCH} proposals at once, not {len(shown)}")
        if len(shown) != len(proof.digests):
            raise ApprovalRefused(f"the assertion covers {len(proof.digests)} proposals, but {len(shown)} were sent")
        # What the page warns about is read beside the content, never approved from a queue row.
        with self.transaction() as tx:
            ids = [s.proposal_id for s in shown]
            warned = cautioned.refuse_batch(tx, ids, reviewer, actor or f"reviewer:{reviewer}")
        if warned is not None:
            raise warned
        return self._decide(list(enumerate(shown)), "approved", reviewer, None, actor, proof, rules)

    def _decide(
        self,
        items: list[tuple[int, Shown]],
        verdict: str,
        reviewer: str,
        reason: str | None,
        actor: str | None,
        proof: Proof | PasswordProof | None,
        rules: ApprovalRules,
    ) -> list[Event]:
        actor = actor or f"reviewer:{reviewer}"
        why = (reason or "").strip() or None
        posted = [
            Posted(s.proposal_id, verdict, reviewer, s.sha256, s.path, why, s.mode, s.base_sha256) for _, s in items
        ]
        given: Proof | PasswordCheck | None = None  # a rejection needs only the session
        if verdict == "approved":
            given = self._password_check(reviewer, proof) if isinstance(proof, PasswordProof) else proof
        signer, keyring = self.signer(), self.keyring()  # read before the write lock is taken
        with self.transaction() as tx:
            refused = first_refusal(tx, posted, keyring, rules)
            if refused is None:
                try:
                    checked = (
                        None
                        if verdict != "approved"
                        else check_proof(tx, reviewer, subjects(tx, items), given, rules, keyring)
                    )
                except ApprovalRefused as exc:  # the proof did not hold: only the events commit
                    method = "passkey" if isinstance(given, Proof) else "password" if given is not None else None
                    for p in posted:
                        payload = refusal_payload(p, exc.reason) | {"method": method}
                        tx.append_event(ev.APPROVAL_REFUSED, actor, payload, p.proposal_id)
                    refused = posted[0], exc.reason, exc
                else:
                    events = self._record(tx, posted, [i for i, _ in items], signer, actor, checked, rules)
                    if events is not None:
                        return events
                    pid = posted[0].proposal_id
                    won = already_decided(tx, pid) or Conflict(f"proposal {pid} is already decided")
                    refused = posted[0], "already decided", won
                    # Nothing else was written in this transaction: the refusal event commits alone.
                    tx.append_event(ev.DECISION_REFUSED, actor, refusal_payload(*refused[:2]), pid)
            else:
                p, words, _ = refused
                tx.append_event(ev.DECISION_REFUSED, actor, refusal_payload(p, words), p.proposal_id)
        raise refused[2]

    @staticmethod
    def _record(
        tx: Tx,
        posted: list[Posted],
        indexes: list[int],
        signer: Signer,
        actor: str,
        checked: Checked | None,
        rules: ApprovalRules,
    ) -> list[Event] | None:
        """The decision rows (or, short of a rule's ``approvals``, approval rows) and events, the nonce
        spent; None (nothing written) when a racing decision won."""
        tx.run("SAVEPOINT decide")
        try:
            events = []
            for i, p in zip(indexes, posted, strict=True):
                counted = quorum.count(tx, p, rules) if p.verdict == "approved" else None
                events.append(record_decision(tx, p, signer, actor, checked, i, counted))
        except tx.integrity_errors:  # the UNIQUE index is the last word
            tx.run("ROLLBACK TO decide")
            return None
        if checked is not None:
            spend(tx, checked)
        tx.run("RELEASE decide")
        return events

    def _password_check(self, reviewer: str, proof: PasswordProof) -> PasswordCheck:
        """argon2 outside the write lock; the transaction then checks the hash is still this one."""
        with self.transaction() as tx:
            row = tx.first("SELECT password_hash FROM reviewer WHERE name = ? AND disabled_at IS NULL", (reviewer,))
        stored = None if row is None else str(row[0])
        from gatekeeper.trust.passwords import verify_password  # argon2 only where a password is checked

        return PasswordCheck(stored, verify_password(stored, proof.password))


def first_refusal(
    tx: Tx, posted: list[Posted], keyring: KeyRing, rules: ApprovalRules
) -> tuple[Posted, str, Exception] | None:
    """The first posted decision that may not be recorded, the event's words and the caller's error."""
    for p in posted:
        words, error = decision_refusal(tx, p, keyring)
        if words is not None and error is not None:
            return p, words, error
        if (scoped := quorum.refusal(tx, p, rules)) is not None:
            return p, *scoped
    return None


def subjects(tx: Tx, items: list[tuple[int, Shown]]) -> list[tuple[int, Subject]]:
    """What each approval approves, as stored (the posted values were checked equal)."""
    out = []
    for index, s in items:
        row = tx.first("SELECT mode, path, base_sha256, sha256 FROM proposal WHERE id = ?", (s.proposal_id,))
        assert row is not None  # decision_refusal refused an unknown proposal
        out.append((index, Subject(s.proposal_id, row[0], row[1], row[2], row[3])))
    return out


def refusal_payload(p: Posted, words: str) -> dict[str, Any]:
    """A refusal's fields: what was posted (bounded), and why."""
    payload: dict[str, Any] = bounded(
        {"verdict": p.verdict, "reviewer": p.reviewer, "why": words, "sha256": p.sha256, "path": p.path}
        | ({} if p.mode is None else {"mode": p.mode})
        | ({} if p.base_sha256 is None else {"base_sha256": p.base_sha256})
    )
    return payload


def record_decision(
    tx: Tx, d: Posted, signer: Signer, actor: str, checked: Checked | None, index: int, counted: quorum.Count | None
) -> Event:
    """Sign (Ed25519, over everything the committer acts on) and insert the decision row (its
    UNIQUE index may still refuse it) and its event; an approval short of the rule's ``approvals``
    (``counted``) goes to the ``approval`` table instead, signed the same way."""
    decided_at = now_ts()
    row = tx.first(
        "SELECT server, tool, workspace, workspace_real, mode, base_sha256 FROM proposal WHERE id = ?", (d.proposal_id,)
    )
    assert row is not None  # decision_refusal refused an unknown proposal
    server, tool, workspace, workspace_real, mode, base_sha = row
    proof = {} if checked is None else checked.columns(index)
    assertion = None if checked is None or checked.proof is None else checked.proof.assertion
    facts = signing.DecisionFacts(
        proposal_id=d.proposal_id,
        server=server,
        tool=tool,
        workspace=workspace,
        workspace_real=workspace_real,
        path=d.path,
        mode=mode,
        base_sha256=base_sha,
        sha256=d.sha256,
        verdict=d.verdict,
        reviewer=d.reviewer,
        reason=d.reason,
        decided_at=decided_at,
        method=None if checked is None else checked.method,
        nonce=None if checked is None or checked.proof is None else checked.proof.nonce,
        assertion_sha256=None if assertion is None else assertion.sha256(),
    )
    signature = signer.sign(facts.message(signer.key_id))
    fields = dict(verdict=d.verdict, reviewer=d.reviewer, reason=d.reason, sha256=d.sha256, path=d.path)
    fields |= dict(mode=mode, base_sha256=base_sha)
    columns = {"proposal_id": d.proposal_id, **fields, "decided_at": decided_at, "signature": signature, **proof}
    shown = {k: v for k, v in proof.items() if k in ("method", "nonce", "assertion_index")}
    if assertion is not None:
        shown["credential_id"] = assertion.credential_id
    payload = {**fields, **shown, "key_id": signer.key_id, "signature": signature}
    if counted is not None and not counted.completes:
        del columns["verdict"]
        tx.insert("approval", {**columns, "key_id": signer.key_id})
        payload |= {"approvals": counted.have + 1, "needed": counted.needed}
        return tx.append_event(ev.APPROVAL_RECORDED, actor, payload, d.proposal_id)
    tx.insert("decision", {**columns, "key_id": signer.key_id})
    return tx.append_event(ev.DECISION, actor, payload, d.proposal_id)


def decision_refusal(tx: Tx, d: Posted, keyring: KeyRing) -> tuple[str | None, Exception | None]:
    """Why this decision may not be recorded (the event's words, the caller's error); (None, None) if it may."""
    pid = d.proposal_id
    if d.verdict not in VERDICTS:
        return "bad verdict", InvalidInput(f"unknown verdict {d.verdict!r}", "use 'approved' or 'rejected'")
    if d.verdict == "rejected" and not d.reason:
        return "no reason", InvalidInput("a rejection needs a reason", "say what the agent should change")
    row = tx.first("SELECT sha256, path, expires_at, mode, base_sha256 FROM proposal WHERE id = ?", (pid,))
    if row is None:
        return "no such proposal", NotFound(f"no proposal {pid}")
    who = tx.first("SELECT disabled_at FROM reviewer WHERE name = ?", (d.reviewer,))
    if who is None or who[0] is not None:
        return "reviewer unknown or disabled", Conflict(f"reviewer {d.reviewer!r} is unknown or disabled")
    if (why := reviewer_refusal(tx, keyring, d.reviewer)) is not None:
        tx.append_event(ev.REVIEWER_ROW_REFUSED, f"reviewer:{d.reviewer}", {"reviewer": d.reviewer, "why": why})
        return "reviewer row not signed", Conflict(
            f"the row of reviewer {d.reviewer!r} is not signed by the review key: {why} "
            "(its password, passkeys or enabled flag may have been changed in the database)",
            f"set the password again with `gatekeeper reviewer passwd {d.reviewer}` and run `gatekeeper audit verify`",
        )
    if (decided := already_decided(tx, pid)) is not None:
        return "already decided", decided
    if d.sha256 != row[0] or d.path != row[1]:
        return "digest or path mismatch", Conflict(
            f"the approval names sha256 {d.sha256[:12]}… at {d.path!r}, but proposal {pid} "
            f"is sha256 {row[0][:12]}… at {row[1]!r}",
            "reload the proposal page and decide on what it shows now",
        )
    mode_shown = d.mode if d.mode is not None or row[3] != "create" else "create"  # a create's page may omit it
    if mode_shown != row[3] or d.base_sha256 != row[4]:
        return "mode or base mismatch", Conflict(
            f"the approval names a {d.mode or 'create'} over base {(d.base_sha256 or 'none')[:12]}…, but proposal "
            f"{pid} is a {row[3]} over base {(row[4] or 'none')[:12]}…",
            "reload the proposal page and decide on what it shows now",
        )
    if d.verdict == "approved" and row[2] <= now_ts():
        return "expired", Conflict(f"proposal {pid} expired at {row[2]}", "ask the agent to propose again")
    return None, None


def already_decided(tx: Tx, proposal_id: str) -> Conflict | None:
    """The refusal of a second decision, saying who made the first and when; None if there is none."""
    row = tx.first("SELECT verdict, reviewer, decided_at FROM decision WHERE proposal_id = ?", (proposal_id,))
    if row is None:
        return None
    verdict, reviewer, at = str(row[0]), str(row[1]), str(row[2])
    return Conflict(
        f"proposal {proposal_id} is already decided: {verdict} by {reviewer} {humane.ago(at)}, "
        f"at {humane.local(at)} ({humane.iso(at)})",
        "reload its page to see the decision and what followed",
    )

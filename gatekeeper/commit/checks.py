"""What must hold before any byte is written: the approval is genuine and names exactly these
bytes (and, for a change, exactly this base) at exactly this path, and the current policy still lets
this tool do this (create, replace, append, edit or delete) at this path.

Run again on every attempt (the first, and any after a crash), so a policy tightened in between
wins. A failed check is a ``refused`` outcome whose detail says why and what to do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatekeeper.canonical import sha256_hex
from gatekeeper.commit.revert import REVERT_TOOL, revert_rule
from gatekeeper.commit.trust import Trust, signature_problem
from gatekeeper.content.paths import normalise_destination
from gatekeeper.errors import InvalidInput
from gatekeeper.policy import Policy
from gatekeeper.trust.approval import (
    ApprovalRefused,
    Assertion,
    Proof,
    RelyingParty,
    StoredPasskey,
    Subject,
    verify_approval,
)


@dataclass(frozen=True)
class Candidate:
    """An approved proposal without an outcome, as ``Reader.commit_queue`` returns it."""

    id: str
    created_at: str
    server: str
    tool: str
    workspace: str
    path: str
    sha256: str
    size: int
    decision_id: int
    verdict: str
    reviewer: str
    reason: str | None
    decision_sha256: str
    decision_path: str
    decided_at: str
    signature: str
    has_intent: bool
    workspace_real: str | None = None  # NULL on proposals made before migration 0004
    mode: str = "create"  # migration 0006: a change to an existing file, over its base
    base_sha256: str | None = None
    base_size: int | None = None
    decision_mode: str | None = None  # NULL on decisions made before migration 0006
    decision_base_sha256: str | None = None
    # The reviewer's proof (migration 0007; NULL before): method, and for a passkey the assertion and
    # its place in the digest list, with the passkey its credential names (NULL: none such).
    method: str | None = None
    nonce: str | None = None
    assertion: str | None = None
    assertion_index: int | None = None
    assertion_digests: str | None = None
    passkey_credential: str | None = None
    passkey_reviewer: str | None = None
    passkey_public_key: bytes | None = None
    passkey_label: str | None = None
    passkey_created_at: str | None = None
    passkey_removed_at: str | None = None
    key_id: str | None = None  # the Ed25519 key that signed the decision (migration 0008); None: HMAC
    client_name: str | None = None  # the requester, as far as a proposal knows it (store/quorum.py)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Candidate:
        return cls(**{**row, "has_intent": bool(row["has_intent"])})


@dataclass(frozen=True)
class Plan:
    """Where and how to write the file, once every check has passed."""

    workspace: Path
    mode: int  # a new file's permissions
    file_mode: int | None = None  # set explicitly by the rule: a changed file gets it too (None: keeps its own)

    def final_path(self, rel: str) -> str:
        return str(self.workspace / rel)


class Refusal(Exception):
    """A check failed: the proposal is recorded as ``refused`` with this detail; nothing is written."""


def check_approval(c: Candidate, content: bytes | None, trust: Trust) -> None:
    """The decision's signature verifies for this proposal as stored (``trust``), and decision
    sha256 = proposal sha256 = sha256(stored bytes)."""
    problem = signature_problem(c, trust)
    if problem is not None:
        raise Refusal(problem)
    if content is None:
        raise Refusal("the proposal's stored content is missing")
    actual = sha256_hex(content)
    if not (c.decision_sha256 == c.sha256 == actual):
        raise Refusal(
            f"digests differ: the approval names sha256 {c.decision_sha256[:16]}…, the proposal records "
            f"{c.sha256[:16]}…, its stored bytes hash to {actual[:16]}…; the database may have been altered, "
            "run `gatekeeper audit verify`"
        )
    if c.decision_path != c.path:
        raise Refusal(f"the approval names path {c.decision_path!r} but the proposal is for {c.path!r}")
    approved_mode = c.decision_mode or "create"  # decisions before migration 0006 approved creates only
    if approved_mode != c.mode or c.decision_base_sha256 != c.base_sha256:
        raise Refusal(
            f"the approval names a {approved_mode} over base {(c.decision_base_sha256 or 'none')[:16]}…, but the "
            f"proposal is a {c.mode} over base {(c.base_sha256 or 'none')[:16]}…; the database may have been "
            "altered, run `gatekeeper audit verify`"
        )


def check_proof(c: Candidate, policy: Policy) -> None:
    """The reviewer's proof holds: a stored assertion verifies again (signature, challenge = this
    decision's digest, origin, rp id, flags, the deciding reviewer's passkey, not removed before the
    decision); a passkey approval has its assertion; under ``approve_with: passkey`` every approval
    has one. The sign counter is checked at approval only (it has moved on since)."""
    if c.assertion is None:
        if c.method == "passkey":
            raise Refusal("the approval says it was made with a passkey but carries no assertion; approve again")
        if policy.approve_with == "passkey":
            how = f"with the {c.method}" if c.method else "without a passkey (before passkeys)"
            raise Refusal(
                f"the policy accepts passkey approvals only (approve_with: passkey), and this one was made {how}; "
                "a reviewer with a passkey must approve it again on a new proposal"
            )
        return
    try:
        verify_approval(
            Subject(c.id, c.mode, c.path, c.base_sha256, c.sha256),
            c.reviewer,
            stored_proof(c),
            stored_passkey(c),
            RelyingParty.for_review_url(policy.review_url),
            decided_at=c.decided_at,
            check_counter=False,
        )
    except ApprovalRefused as exc:
        raise Refusal(
            f"the approval's passkey assertion does not verify: {exc}; the database may have been altered, "
            "run `gatekeeper audit verify --approvals`"
        ) from None


def stored_proof(c: Candidate) -> Proof:
    """The proof as the decision stored it; ``ApprovalRefused`` when the stored columns are not one."""
    try:
        digests = json.loads(c.assertion_digests or "null")
        if not isinstance(digests, list) or not all(isinstance(d, str) for d in digests):
            raise ValueError("not a list of hex digests")
    except ValueError:
        raise ApprovalRefused("the decision's list of digests is not a JSON list of hex digests") from None
    if c.nonce is None or c.assertion_index is None or c.assertion is None:
        raise ApprovalRefused("the decision's nonce or assertion index is missing")
    return Proof(c.nonce, Assertion.from_json(c.assertion), c.assertion_index, tuple(digests))


def stored_passkey(c: Candidate) -> StoredPasskey | None:
    if c.passkey_credential is None or c.passkey_reviewer is None or c.passkey_public_key is None:
        return None
    return StoredPasskey(
        c.passkey_credential,
        c.passkey_reviewer,
        bytes(c.passkey_public_key),
        0,
        c.passkey_label or "",
        c.passkey_created_at or "",
        c.passkey_removed_at,
    )


def check_root(c: Candidate, actual: str) -> None:
    """The opened workspace root is the folder the proposal was made for (and its approval signed):
    a root swapped for a symlink since then would put the file in the link's target.

    Proposals from before migration 0004 recorded no real path: for them the recorded workspace
    itself must be the real path, so a root (or a folder above it) that is a symlink now is refused.
    """
    expected = c.workspace_real or c.workspace
    if actual != expected:
        raise Refusal(
            f"the workspace root {c.workspace} now resolves to {actual}, not {expected} as approved; "
            "if the folder was moved on purpose, propose again so a reviewer sees the new place"
        )


def check_policy(c: Candidate, size: int, policy: Policy) -> Plan:
    """The current policy still has this server and workspace, and this tool may still do this to this
    path: the rule's mode is the proposal's (or it is a create and the rule has ``create_if_missing``)."""
    server = policy.servers.get(c.server)
    if server is None:
        raise Refusal(f"the policy ({policy.source}) no longer has a server {c.server!r}; propose again")
    rule = policy.rule(c.server, c.tool)
    reverting = c.tool == REVERT_TOOL
    if reverting:  # no policy names it: a rule of the server that still lets this path through
        rule = revert_rule(policy, c.server, c.path) or rule
    if rule.action != "propose" or rule.propose is None:
        raise Refusal(f"the policy no longer lets {c.server}.{c.tool} propose files (it is now {rule.action!r})")
    allowed = {rule.propose.mode} | ({"create"} if rule.propose.create_if_missing else set())
    # A revert restores what a rule let through, in whatever mode that takes (an append's revert
    # is a replace); a reviewer approved exactly that.
    if c.mode not in allowed and not reverting:
        raise Refusal(
            f"the policy no longer lets {c.server}.{c.tool} {_verb(c.mode)} (its mode is now "
            f"{rule.propose.mode!r}); propose again"
        )
    if str(server.workspace) != c.workspace:
        raise Refusal(
            f"the workspace of server {c.server!r} is now {server.workspace}, but the proposal was made for "
            f"{c.workspace}; propose again so a reviewer sees the new destination"
        )
    try:
        normalised = normalise_destination(c.path, server.workspace)
    except InvalidInput as exc:
        raise Refusal(str(exc)) from None
    if normalised != c.path:
        raise Refusal(f"the path {c.path!r} is not in normal form (it would be {normalised!r})")
    if not rule.propose.allows(c.path):
        raise Refusal(
            f"the path {c.path!r} no longer matches what {c.server}.{c.tool} may create "
            f"({' or '.join(rule.propose.globs)})"
        )
    if size > rule.propose.max_bytes:
        raise Refusal(f"the content is {size:,} bytes, over the rule's max_bytes of {rule.propose.max_bytes:,}")
    if c.base_size is not None and c.base_size > rule.propose.max_bytes:
        raise Refusal(
            f"the file it changes was {c.base_size:,} bytes, over the rule's max_bytes of {rule.propose.max_bytes:,}"
        )
    return Plan(server.workspace, rule.propose.new_file_mode, rule.propose.file_mode)


def _verb(mode: str) -> str:
    return {"create": "create files", "delete": "delete files"}.get(mode, f"{mode} existing files")

"""Whose signatures a committer trusts: the review side's Ed25519 public keys, and for decisions
made before them, the HMAC in ``secret.key`` up to the recorded bound.

A committer holds public keys only, so it can check an approval but never make one. The decision's
message is rebuilt from the proposal row as it is now (server, tool, workspace, path, mode,
digests) and from the decision row: a proposal moved to another server, workspace or path after
approval, or a decision copied to another proposal, no longer matches what was signed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gatekeeper.canonical import sha256_hex
from gatekeeper.errors import GatekeeperError
from gatekeeper.trust import signing

if TYPE_CHECKING:
    from gatekeeper.commit.checks import Candidate
    from gatekeeper.home import Home
    from gatekeeper.trust.keys import KeyRing


@dataclass(frozen=True)
class Trust:
    keyring: KeyRing
    hmac_until: int = 0  # decisions with ids up to this may be HMAC-signed (made before Ed25519)
    hmac_key: bytes | None = field(default=None, repr=False)  # secret.key, where this machine has it

    @classmethod
    def of(cls, home: Home) -> Trust:
        keys = home.keys
        try:
            hmac_key: bytes | None = home.read_key() if keys.legacy_hmac_until() else None
        except GatekeeperError:
            hmac_key = None  # a committer elsewhere has no secret.key: older decisions wait for one that has
        return cls(keys.keyring(), keys.legacy_hmac_until(), hmac_key)


def signature_problem(c: Candidate, trust: Trust) -> str | None:
    """Why the decision's signature does not hold for this proposal as stored now (None: it holds)."""
    assertion_sha = None if c.assertion is None else sha256_hex(c.assertion.encode("utf-8"))
    if c.key_id is None:
        return _legacy_problem(c, trust, assertion_sha)
    if c.key_id not in trust.keyring.public:
        return (
            f"the approval is signed with key {c.key_id}, which this machine does not know: import the review "
            "side's public keys (`gatekeeper keys export-public` there, `gatekeeper keys import-public` here)"
        )
    facts = signing.DecisionFacts(
        proposal_id=c.id,
        server=c.server,
        tool=c.tool,
        workspace=c.workspace,
        workspace_real=c.workspace_real,
        path=c.decision_path,
        mode=c.decision_mode,
        base_sha256=c.decision_base_sha256,
        sha256=c.decision_sha256,
        verdict=c.verdict,
        reviewer=c.reviewer,
        reason=c.reason,
        decided_at=c.decided_at,
        method=c.method,
        nonce=c.nonce,
        assertion_sha256=assertion_sha,
    )
    if not trust.keyring.verify(c.key_id, facts.message(c.key_id), c.signature):
        return (
            f"the approval's Ed25519 signature does not verify (key {c.key_id}) for this proposal as stored now: "
            "the decision was not made for it, or its server, tool, workspace, path or bytes were changed in the "
            "database after approval; nothing approved it here, run `gatekeeper audit verify`"
        )
    return None


def _legacy_problem(c: Candidate, trust: Trust, assertion_sha: str | None) -> str | None:
    """A decision without a key id: HMAC-signed, valid only if made before the first Ed25519 key."""
    if c.decision_id > trust.hmac_until:
        return (
            "the approval carries no Ed25519 signature, and decisions made since this Gatekeeper has Ed25519 keys "
            "always do: it was not recorded by the review page; have a reviewer decide again on a new proposal"
        )
    if trust.hmac_key is None:
        return "the approval was HMAC-signed before Ed25519 keys, and this machine has no secret.key to check it"
    message = signing.decision_message(
        proposal_id=c.id,
        verdict=c.verdict,
        reviewer=c.reviewer,
        reason=c.reason,
        sha256=c.decision_sha256,
        path=c.decision_path,
        decided_at=c.decided_at,
        workspace_real=c.workspace_real,
        mode=c.decision_mode,
        base_sha256=c.decision_base_sha256,
        method=c.method,
        nonce=c.nonce,
        assertion_sha256=assertion_sha,
    )
    if not signing.verify(trust.hmac_key, message, c.signature):
        return (
            "the approval's signature does not verify with secret.key: it was not recorded by Gatekeeper's "
            "review page, or the key has changed since; have a reviewer decide again on a new proposal"
        )
    return None

"""The canonical messages Gatekeeper signs, and the HMAC of decisions made before Ed25519.

Since migration 0008 a decision, a reviewer row, a passkey row and a chain checkpoint are signed
with the review side's Ed25519 key (``gatekeeper.trust.keys``) over the messages below; committers and
``audit verify`` hold only public keys. A decision's message covers everything the committer acts
on, read from the proposal row (server, tool, workspace and its real path, path, mode, base and
result sha256) and from the decision (verdict, reviewer, reason, time, proof), plus the key id.

What follows is the older HMAC (``secret.key``), kept only to verify decisions made before the
first Ed25519 key (their ids are at most ``Keys.legacy_hmac_until``); new decisions never use it.

A decision on a proposal that recorded its workspace's real path (migration 0004) also signs
that path, so the approval names the folder the reviewer was shown. Older decisions were signed
without it and their proposals have none: the key is left out of the message exactly then, so
they still verify, and a recorded path cannot be dropped or changed after the fact.

The same holds for the mode and base digest of a change (migration 0006): a decision made since
always records its mode, and then the message carries ``mode`` and ``base_sha256`` (None for a
create); decisions from before have neither.

And for the reviewer's proof (migration 0007): a decision made since carries ``method``
('passkey' or 'password'; a rejection None, as before), and a passkey approval its challenge
``nonce`` and ``assertion_sha256`` (sha256 of the stored assertion JSON). Present only when set, so
older decisions still verify; once set, nobody without the key can strip or swap them.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import asdict, dataclass

from gatekeeper.canonical import canonical_bytes, sha256_hex

DECISION_PURPOSE = "gatekeeper.decision.v1"
DECISION_V2 = "gatekeeper.decision.v2"
REVIEWER_PURPOSE = "gatekeeper.reviewer.v2"  # v2: the seq of the event that records the change
PASSKEY_PURPOSE = "gatekeeper.passkey.v2"
CHECKPOINT_PURPOSE = "gatekeeper.checkpoint.v1"


@dataclass(frozen=True)
class DecisionFacts:
    """Everything an Ed25519 decision signature covers (None where a column is NULL)."""

    proposal_id: str
    server: str
    tool: str
    workspace: str
    workspace_real: str | None
    path: str
    mode: str | None  # always set by the review page since 0008; a NULL written later must not verify
    base_sha256: str | None
    sha256: str
    verdict: str
    reviewer: str
    reason: str | None
    decided_at: str
    method: str | None = None
    nonce: str | None = None
    assertion_sha256: str | None = None

    def message(self, key_id: str) -> bytes:
        return canonical_bytes({"purpose": DECISION_V2, "key_id": key_id, **asdict(self)})


def reviewer_message(
    key_id: str, name: str, password_hash: str, created_at: str, disabled_at: str | None, seq: int
) -> bytes:
    """A reviewer row as signed: who, the password hash, whether (since when) disabled, and ``seq``:
    the audit event that records this change. An older signed row put back no longer matches the
    reviewer's latest change event, so it is refused (``store/signed_rows.py``)."""
    fields = {"name": name, "password_hash": password_hash, "created_at": created_at, "disabled_at": disabled_at}
    return canonical_bytes({"purpose": REVIEWER_PURPOSE, "key_id": key_id, **fields, "seq": seq})


def passkey_message(
    key_id: str,
    reviewer: str,
    credential_id: str,
    public_key: bytes,
    created_at: str,
    removed_at: str | None,
    seq: int,
) -> bytes:
    """A passkey row as signed (not its sign counter, which moves with every use), with the seq of
    the event that records this change, as for a reviewer row."""
    fields: dict[str, str | int | None] = {"reviewer": reviewer, "credential_id": credential_id}
    fields["public_key_sha256"] = sha256_hex(public_key)
    fields |= {"created_at": created_at, "removed_at": removed_at, "seq": seq}
    return canonical_bytes({"purpose": PASSKEY_PURPOSE, "key_id": key_id, **fields})


def checkpoint_message(key_id: str, seq: int, head_hash: str) -> bytes:
    """A chain head as a checkpoint signs it: the event at ``seq`` has hash ``head_hash``."""
    return canonical_bytes({"purpose": CHECKPOINT_PURPOSE, "key_id": key_id, "seq": seq, "hash": head_hash})


def decision_message(
    *,
    proposal_id: str,
    verdict: str,
    reviewer: str,
    reason: str | None,
    sha256: str,
    path: str,
    decided_at: str,
    workspace_real: str | None = None,
    mode: str | None = None,
    base_sha256: str | None = None,
    method: str | None = None,
    nonce: str | None = None,
    assertion_sha256: str | None = None,
) -> bytes:
    message: dict[str, str | None] = {
        "purpose": DECISION_PURPOSE,
        "proposal_id": proposal_id,
        "verdict": verdict,
        "reviewer": reviewer,
        "reason": reason,
        "sha256": sha256,
        "path": path,
        "decided_at": decided_at,
    }
    if workspace_real is not None:
        message["workspace_real"] = workspace_real
    if mode is not None:
        message["mode"] = mode
        message["base_sha256"] = base_sha256
    elif base_sha256 is not None:
        raise ValueError("a base digest is signed only with its mode")
    if method is not None:
        message["method"] = method
    if nonce is not None or assertion_sha256 is not None:
        if method != "passkey" or nonce is None or assertion_sha256 is None:
            raise ValueError("a nonce and an assertion digest are signed together, with method 'passkey'")
        message["nonce"] = nonce
        message["assertion_sha256"] = assertion_sha256
    return canonical_bytes(message)


def sign(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def verify(key: bytes, message: bytes, signature: str) -> bool:
    return hmac.compare_digest(sign(key, message), signature)

"""Signed checkpoints: the review side's Ed25519 signature over the chain head, as an event.

The hash chain alone shows that rows were edited, but someone who can write the database can
delete a row and recompute every later hash. A checkpoint signs (seq, hash) with a key the database
does not hold, so ``audit verify`` can tell that the event at that seq is no longer the one signed.
"""

from __future__ import annotations

from gatekeeper.store import events as ev
from gatekeeper.store.tx import Event, Transactions
from gatekeeper.trust import signing

CHECKPOINT_EVERY = 300.0  # seconds between the review page's checkpoints (when the chain moved)


def append_checkpoint(store: Transactions, actor: str = "review") -> Event | None:
    """Sign the current head and append it as a ``chain_checkpoint`` event, in one transaction;
    None when the head is already a checkpoint (nothing new to sign)."""
    signer = store.signer()
    with store.transaction() as tx:
        head = tx.first("SELECT seq, hash, kind FROM audit_event ORDER BY seq DESC LIMIT 1")
        if head is None or head[2] == ev.CHECKPOINT:
            return None
        seq, digest = int(head[0]), str(head[1])
        signature = signer.sign(signing.checkpoint_message(signer.key_id, seq, digest))
        payload = {"seq": seq, "hash": digest, "key_id": signer.key_id, "signature": signature}
        return tx.append_event(ev.CHECKPOINT, actor, payload)

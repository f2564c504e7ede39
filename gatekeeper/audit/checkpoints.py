"""``audit verify`` checks every signed checkpoint: its Ed25519 signature by a known key, and that
the event at the seq it names still has the hash it signed. Run after the chain itself verified,
so the stored hashes are the recomputed ones."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gatekeeper import signing
from gatekeeper.store.queries import Reader

if TYPE_CHECKING:
    from gatekeeper.keys import KeyRing


@dataclass
class CheckpointReport:
    checked: int = 0
    last_seq: int | None = None  # the latest chain head a valid checkpoint covers
    problems: list[tuple[int, str]] = field(default_factory=list)  # (checkpoint's seq, why)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_checkpoints(reader: Reader, keyring: KeyRing) -> CheckpointReport:
    report = CheckpointReport()
    for seq, text, actual in reader.checkpoints():
        report.checked += 1
        try:
            p = json.loads(text)
            signed_seq, signed_hash, kid, signature = int(p["seq"]), str(p["hash"]), p["key_id"], p["signature"]
        except (ValueError, KeyError, TypeError):
            report.problems.append((seq, "the checkpoint's payload is not a checkpoint"))
            continue
        if kid not in keyring.public:
            report.problems.append((seq, f"the checkpoint is signed with key {kid}, which this machine does not know"))
        elif not keyring.verify(kid, signing.checkpoint_message(kid, signed_seq, signed_hash), signature):
            report.problems.append(
                (seq, "the checkpoint's signature does not verify: it was not made by the review side")
            )
        elif actual != signed_hash:
            found = "no event" if actual is None else f"hash {actual}"
            report.problems.append(
                (
                    seq,
                    f"the checkpoint signed hash {signed_hash} at seq {signed_seq}, the log has {found} there: "
                    "history before it was rewritten and the later hashes recomputed",
                )
            )
        else:
            report.last_seq = max(report.last_seq or 0, signed_seq)
    return report

"""The SQLite store: the write door (``Store``), the read side (``Reader``) and the chain."""

from gatekeeper.store.queries import STATUSES, ProposalRow, Reader
from gatekeeper.store.store import Event, ProposalDraft, Proposed, Store

__all__ = ["STATUSES", "Event", "ProposalDraft", "ProposalRow", "Proposed", "Reader", "Store"]

"""The one door through which state changes: each method is one BEGIN IMMEDIATE transaction
that writes its rows and its audit event together, or nothing at all.

No MCP, no HTTP here. Refusals (a forged approval, a second decision) are recorded as events
in a transaction of their own that commits, and then raised to the caller. Tool pins live in
``pins``, commit records in ``commits``, decisions in ``decisions``, passkeys in ``passkeys``;
``Store`` is all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gatekeeper.canonical import canonical_json, new_id, now_ts, sha256_hex
from gatekeeper.errors import Conflict, InvalidInput, NotFound
from gatekeeper.store import events as ev
from gatekeeper.store.commits import CommitRecords
from gatekeeper.store.decisions import Decisions
from gatekeeper.store.passkeys import Passkeys
from gatekeeper.store.pins import ToolPins
from gatekeeper.store.signed_rows import change_seqs, next_seq, reviewer_signed
from gatekeeper.store.tx import RETRY_SECONDS, Event, Tx
from gatekeeper.store.values import MODES
from gatekeeper.trust.row_marks import remember

__all__ = ["Event", "ProposalDraft", "Proposed", "Store", "Tx"]


@dataclass(frozen=True)
class Reviewer:
    """A row of ``reviewer``: a plain record, so the store needs no SQLModel class to return it."""

    name: str
    password_hash: str
    created_at: str
    disabled_at: str | None = None  # once set, final


@dataclass(frozen=True)
class ProposalDraft:
    """Everything the proxy knows about a write call once policy has turned it into a path and bytes."""

    server: str
    tool: str
    arguments: Any  # the exact argument object received (JSON value)
    workspace: str
    path: str
    content: bytes
    policy_digest: str
    expires_at: str
    encoding: str = "text"
    client_name: str | None = None
    client_version: str | None = None
    protocol_version: str | None = None
    session_id: str | None = None
    # The workspace root's resolved real path when the proposal was made: the committer refuses
    # if the root resolves elsewhere by then. None: unknown (then the workspace itself must be real).
    workspace_real: str | None = None
    # A change to an existing file: its mode and the exact bytes read at the destination (its
    # base). ``content`` is then the whole file after the change (empty for delete).
    mode: str = "create"
    base: bytes | None = None


@dataclass(frozen=True)
class Proposed:
    id: str
    created: bool  # False: an identical pending proposal already existed and is returned
    sha256: str
    size: int
    expires_at: str


class Store(ToolPins, CommitRecords, Decisions, Passkeys):
    """A Gatekeeper database: opening checks the schema; writes go through the methods below."""

    # -- proposals ---------------------------------------------------------------------------

    def propose(
        self,
        draft: ProposalDraft,
        actor: str = "proxy",
        *,
        reverts: str | None = None,
        retry_seconds: float = RETRY_SECONDS,
    ) -> Proposed:
        """Record a proposal, or return the identical one still pending (agents retry).

        ``reverts``: the committed proposal this one restores (``gatekeeper revert``); a
        ``revert_proposed`` event naming it follows ``proposal_created`` in the same transaction.
        ``retry_seconds``: how long to keep reconnecting to a database server that went away (the
        proxy answers its host sooner than the store's default).
        """
        if draft.encoding not in ("text", "base64"):
            raise InvalidInput(f"unknown encoding {draft.encoding!r}", "use 'text' or 'base64'")
        _check_change(draft)
        base_sha = None if draft.base is None else sha256_hex(draft.base)
        arguments = canonical_json(draft.arguments, allow_floats=True)
        args_sha = sha256_hex(arguments.encode("utf-8"))
        digest = sha256_hex(draft.content)

        def work(tx: Tx) -> Proposed:
            now = now_ts()
            existing = tx.first(
                "SELECT p.id, p.expires_at FROM proposal p WHERE p.server = ? AND p.tool = ? "
                "AND p.args_sha256 = ? AND p.path = ? AND p.sha256 = ? AND p.expires_at > ? "
                "AND p.workspace = ? AND p.workspace_real IS ? AND p.mode = ? AND p.base_sha256 IS ? "
                "AND NOT EXISTS (SELECT 1 FROM decision d WHERE d.proposal_id = p.id) "
                "ORDER BY p.created_at DESC LIMIT 1",
                (
                    *(draft.server, draft.tool, args_sha, draft.path, digest, now),
                    *(draft.workspace, draft.workspace_real, draft.mode, base_sha),
                ),
            )
            if existing:
                payload = {"session_id": draft.session_id, "args_sha256": args_sha}
                tx.append_event(ev.PROPOSAL_REPEATED, actor, payload, existing[0])
                return Proposed(existing[0], False, digest, len(draft.content), existing[1])
            pid = new_id()
            row = _proposal_row(draft, arguments, args_sha, digest)
            tx.insert("proposal", {"id": pid, "created_at": now, **row, **_base_columns(draft, base_sha)})
            payload = {**_created_payload(draft, args_sha, digest), **_change_payload(draft, base_sha)}
            tx.append_event(ev.PROPOSAL_CREATED, actor, payload, pid)
            if reverts is not None:
                tx.append_event(ev.REVERT_PROPOSED, actor, {"reverts": reverts, "mode": draft.mode}, pid)
            return Proposed(pid, True, digest, len(draft.content), draft.expires_at)

        # Idempotent: a retry after a lost COMMIT finds the proposal pending and returns it.
        return self.retrying(work, retry_seconds)

    # -- reviewers ---------------------------------------------------------------------------

    # Each reviewer row is signed with the review side's key (``signed_rows``) for the seq of the event
    # that records the change (appended last in the same transaction): a password hash or enabled flag
    # written by anything else, or an older signed row put back, is refused at log-in and at approval.

    def add_reviewer(self, name: str, password_hash: str, actor: str = "cli") -> Event:
        signer = self.signer()
        with self.transaction() as tx:
            if tx.first("SELECT 1 FROM reviewer WHERE name = ?", (name,)):
                raise Conflict(f"reviewer {name!r} already exists", "pick another name")
            row = {"name": name, "password_hash": password_hash, "created_at": now_ts()}
            signed = reviewer_signed(signer, next_seq(tx), name, password_hash, row["created_at"], None)
            tx.insert("reviewer", {**row, **signed})
            event = tx.append_event(ev.REVIEWER_ADDED, actor, {"reviewer": name, **signed})
        remember(self.keys_dir, "reviewer", name, event.seq)
        return event

    def disable_reviewer(self, name: str, actor: str = "cli") -> Event:
        signer = self.signer()
        with self.transaction() as tx:
            row = tx.first("SELECT disabled_at, password_hash, created_at FROM reviewer WHERE name = ?", (name,))
            if row is None:
                raise NotFound(f"no reviewer {name!r}", "`gatekeeper reviewer list` shows them")
            if row[0] is not None:
                raise Conflict(f"reviewer {name!r} is already disabled (since {row[0]})")
            at = now_ts()
            signed = reviewer_signed(signer, next_seq(tx), name, row[1], row[2], at)
            tx.run(
                "UPDATE reviewer SET disabled_at = :at, key_id = :key_id, signature = :signature WHERE name = :name",
                {"at": at, "name": name, **signed},
            )
            ended = _end_sessions(tx, name)
            event = tx.append_event(ev.REVIEWER_DISABLED, actor, {"reviewer": name, "sessions_ended": ended, **signed})
        remember(self.keys_dir, "reviewer", name, event.seq)
        return event

    def set_reviewer_password(self, name: str, password_hash: str, actor: str = "cli") -> Event:
        signer = self.signer()
        with self.transaction() as tx:
            row = tx.first("SELECT disabled_at, created_at FROM reviewer WHERE name = ?", (name,))
            if row is None:
                raise NotFound(f"no reviewer {name!r}", "`gatekeeper reviewer list` shows them")
            _refuse_a_reenabled_row(tx, name, row[0])
            signed = reviewer_signed(signer, next_seq(tx), name, password_hash, row[1], row[0])
            tx.run(
                "UPDATE reviewer SET password_hash = :h, key_id = :key_id, signature = :signature WHERE name = :name",
                {"h": password_hash, "name": name, **signed},
            )
            # A new password is often set because the old one leaked: every session that the old
            # one opened ends with it, in the same transaction (the page checks ended_at each request).
            ended = _end_sessions(tx, name)
            event = tx.append_event(ev.REVIEWER_PASSWORD, actor, {"reviewer": name, "sessions_ended": ended, **signed})
        remember(self.keys_dir, "reviewer", name, event.seq)  # the old row, put back, is refused from now on
        return event

    def reviewer(self, name: str) -> Reviewer | None:
        with self.transaction() as tx:
            row = tx.first("SELECT name, password_hash, created_at, disabled_at FROM reviewer WHERE name = ?", (name,))
        return Reviewer(name=row[0], password_hash=row[1], created_at=row[2], disabled_at=row[3]) if row else None


def _proposal_row(draft: ProposalDraft, arguments: str, args_sha: str, digest: str) -> dict[str, Any]:
    """The proposal's columns, but its id and created_at."""
    return dict(
        server=draft.server,
        tool=draft.tool,
        arguments=arguments,
        args_sha256=args_sha,
        workspace=draft.workspace,
        path=draft.path,
        content=draft.content,
        sha256=digest,
        size=len(draft.content),
        encoding=draft.encoding,
        client_name=draft.client_name,
        client_version=draft.client_version,
        protocol_version=draft.protocol_version,
        session_id=draft.session_id,
        policy_digest=draft.policy_digest,
        expires_at=draft.expires_at,
        workspace_real=draft.workspace_real,
    )


def _check_change(draft: ProposalDraft) -> None:
    """A create has no base; every other mode has one; a delete's result is empty."""
    if draft.mode not in MODES:
        raise InvalidInput(f"unknown mode {draft.mode!r}", f"use one of {', '.join(MODES)}")
    if (draft.base is None) != (draft.mode == "create"):
        raise InvalidInput(f"a {draft.mode} proposal {'has no' if draft.mode == 'create' else 'needs a'} base")
    if draft.mode == "delete" and draft.content:
        raise InvalidInput("a delete proposal has no content")


def _base_columns(draft: ProposalDraft, base_sha: str | None) -> dict[str, Any]:
    size = None if draft.base is None else len(draft.base)
    return {"mode": draft.mode, "base": draft.base, "base_sha256": base_sha, "base_size": size}


def _change_payload(draft: ProposalDraft, base_sha: str | None) -> dict[str, Any]:
    """A create's event stays as it was; a change's names its mode and base."""
    if draft.mode == "create":
        return {}
    return {"mode": draft.mode, "base_sha256": base_sha, "base_size": len(draft.base or b"")}


def _created_payload(draft: ProposalDraft, args_sha: str, digest: str) -> dict[str, Any]:
    return {
        "server": draft.server,
        "tool": draft.tool,
        "path": draft.path,
        "sha256": digest,
        "size": len(draft.content),
        "args_sha256": args_sha,
        "expires_at": draft.expires_at,
        "client": draft.client_name,
        "client_version": draft.client_version,
        "protocol_version": draft.protocol_version,
        "session_id": draft.session_id,
        "policy_digest": draft.policy_digest,
        "workspace_real": draft.workspace_real,
    }


def _refuse_a_reenabled_row(tx: Tx, name: str, disabled_at: str | None) -> None:
    """Disabling is for good (there is no enable command), so an enabled row with a disable event
    was re-enabled by a database writer: re-signing it for a new password would launder that."""
    if disabled_at is not None:
        return
    disabled = next(change_seqs(tx.first, (ev.REVIEWER_DISABLED,), "reviewer", name), None)
    if disabled is not None:
        raise Conflict(
            f"reviewer {name!r} was disabled (audit seq {disabled}), but its row in the database says enabled: "
            "it was changed outside Gatekeeper, and a new password would sign that change",
            f"a disabled reviewer stays disabled: find out who could write the database, then run "
            f"`gatekeeper reviewer disable {name}` and add the person under a new name",
        )


def _end_sessions(tx: Tx, name: str) -> int:
    """End every open review session of ``name``; return how many were open."""
    row = tx.first("SELECT count(*) FROM review_session WHERE reviewer = ? AND ended_at IS NULL", (name,))
    tx.run("UPDATE review_session SET ended_at = ? WHERE reviewer = ? AND ended_at IS NULL", (now_ts(), name))
    return int(row[0]) if row else 0

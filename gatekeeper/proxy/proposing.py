"""A call to a ``propose`` tool: draft, store, then wait, hand off or answer "pending".

The host's arguments become a proposal (proxy/intake.py checks them against the rule). What the
host gets back depends on the rule and the host: with ``wait_seconds`` the call waits for the
person's decision (reporting progress); a 2026-07-28 host with URL elicitation is handed to the
review page (proxy/handoff.py) and its retry resumes here; anyone else gets the pending result
with the review URL. An edit's dry run (``dryRun: true``) is answered with the diff and recorded
nowhere. Nothing here writes a workspace file.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from gatekeeper.canonical import sha256_hex
from gatekeeper.content import changes
from gatekeeper.content.diff import unified
from gatekeeper.errors import InvalidInput
from gatekeeper.home import Home
from gatekeeper.policy import RESERVED_TOOL, Policy, Propose, Server
from gatekeeper.proxy import intake
from gatekeeper.proxy.audit import Audit
from gatekeeper.proxy.catalog import Route
from gatekeeper.proxy.handoff import HandOff
from gatekeeper.proxy.host.call import HostCall
from gatekeeper.proxy.protocol.mcp import CallToolResult, ToolAnswer, text_result, tool_error
from gatekeeper.proxy.status import final_result, read_proposal, wait_for_outcome
from gatekeeper.store import events as ev
from gatekeeper.store.backends import DatabaseUnreachable
from gatekeeper.store.bounded import bounded

WAITING_MESSAGE = "waiting for a person to review the proposal"
# How long a proposing call keeps reconnecting to a database server that went away before the host is
# told: well inside the 60 s a host commonly waits for a tool call (the store's own default is longer).
PROPOSE_RETRY_SECONDS = 30.0
log = logging.getLogger("gatekeeper.proxy")


class Proposer:
    """The propose / wait / hand-off flow of one proxy session."""

    def __init__(self, policy: Policy, home: Home, audit: Audit, session_id: str, key: bytes) -> None:
        self.policy = policy
        self.database = home.database
        self.audit = audit
        self.session_id = session_id
        self.handoff = HandOff(key, self.database)

    def review_url(self, pid: str) -> str:
        """Where a person decides on this proposal."""
        return f"{self.policy.review_url}/proposals/{pid}"

    async def propose(self, call: HostCall, route: Route, arguments: Any) -> ToolAnswer:
        """Answer a host's call to a tool whose rule is ``propose`` (or its retry after a hand-off)."""
        rule = route.rule.propose
        assert rule is not None
        state = call.params.get("requestState")
        if state is not None:
            return await self._resume(call, state)
        server = self.policy.servers[route.server]
        try:
            if changes.dry_run_requested(rule, arguments if isinstance(arguments, dict) else {}):
                return self._dry_run(rule, server, arguments)
            draft = intake.draft(
                route.server, server, route.tool, rule, arguments, self._requester(call), self.policy.digest
            )
        except InvalidInput as exc:
            await self.audit.refused(
                ev.PROPOSAL_REFUSED,
                {
                    "server": route.server,
                    "tool": route.tool,
                    "why": str(exc),
                    "args_sha256": intake.arguments_digest(arguments),
                },
            )
            return tool_error(f"Not proposed: {exc}")
        try:
            proposed = await self.audit.db(
                self.audit.store.propose, draft, self.audit.actor, retry_seconds=PROPOSE_RETRY_SECONDS
            )
        except DatabaseUnreachable as exc:
            log.warning("could not record a proposal for %s/%s: %s", route.server, route.tool, exc)
            return unreachable(exc, proposing=True)
        pending = self._pending_result(
            proposed.id,
            draft.path,
            f"{server.workspace}/{draft.path}",
            proposed.size,
            proposed.sha256,
            proposed.expires_at,
            repeat=not proposed.created,
            mode=draft.mode,
            base=None if draft.base is None else (len(draft.base), sha256_hex(draft.base)),
        )
        if rule.wait_seconds > 0:
            progress = self._progress(call, rule.wait_seconds)
            try:
                outcome = await wait_for_outcome(self.database, proposed.id, rule.wait_seconds, progress)
            except DatabaseUnreachable as exc:  # recorded already: the agent follows it with the status tool
                log.warning("stopped waiting for proposal %s: %s", proposed.id, exc)
                return pending
            return final_result(outcome) if outcome is not None else pending
        if self.handoff.available(call):
            return self.handoff.request(proposed.id, self.review_url(proposed.id))
        return pending

    def _requester(self, call: HostCall) -> intake.Requester:
        """Who asked, as the host declared itself: recorded with the proposal, never trusted."""
        return intake.Requester(
            client_name=call.declared("name"),
            client_version=call.declared("version"),
            protocol_version=call.protocol_version,
            session_id=self.session_id,
        )

    @staticmethod
    def _dry_run(rule: Propose, server: Server, arguments: Any) -> CallToolResult:
        """What the edit would do, as a diff; nothing is recorded and nothing is written."""
        checked = intake.plan(rule, server, arguments)
        base = checked.base or b""
        result = checked.change.result
        diff = unified(base, result, checked.path)
        text = (
            f"Dry run, nothing proposed or written: {_what(checked.change.mode, checked.path)}: "
            f"{_sizes(len(base), len(result))}.\n```diff\n{diff}```\n"
        )
        summary = {
            "dry_run": True,
            "mode": checked.change.mode,
            "destination": checked.path,
            "base_size": len(base),
            "size": len(result),
            "diff": diff,
        }
        return text_result(text, summary)

    def _pending_result(
        self,
        pid: str,
        path: str,
        absolute: str,
        size: int,
        sha256: str,
        expires_at: str,
        *,
        repeat: bool,
        mode: str = "create",
        base: tuple[int, str] | None = None,
    ) -> CallToolResult:
        """The "pending" answer; a change (``base``: size and sha256 of the bytes read) also says its
        mode and size change."""
        url = self.review_url(pid)
        summary = {
            "proposal_id": pid,
            "status": "pending_approval",
            "destination": path,
            "absolute_path": absolute,
            "size": size,
            "sha256": sha256,
            "expires_at": expires_at,
            "review_url": url,
            "repeat": repeat,
        }
        if base is None:
            text = (
                f"Proposed, not written: {path} ({size} bytes, sha256 {sha256[:16]}…). "
                f"Status: pending_approval. A person must approve this exact content at {url} before the file is "
                f"created. Proposal id: {pid} (check it with {RESERVED_TOOL})."
            )
        else:
            summary.update(mode=mode, base_size=base[0], base_sha256=base[1])
            text = (
                f"Proposed, not written: {_what(mode, path)}: {_sizes(base[0], size)}, sha256 {sha256[:16]}…. "
                f"Status: pending_approval. A person must approve this exact change at {url} before it is "
                f"applied; it applies only if the file still has the bytes read now. "
                f"Proposal id: {pid} (check it with {RESERVED_TOOL})."
            )
        if repeat:
            text = "This identical proposal is already pending. " + text
        return text_result(text, summary)

    @staticmethod
    def _progress(call: HostCall, total: float) -> Callable[[float], Awaitable[None]]:
        async def tick(elapsed: float) -> None:
            await call.progress(round(elapsed, 1), float(total), WAITING_MESSAGE)

        return tick

    async def _resume(self, call: HostCall, state: Any) -> CallToolResult:
        """The host retried after the hand-off (see proxy/handoff.py)."""
        pid = self.handoff.proposal_of(state)
        if pid is None:
            await self.audit.refused(ev.PROPOSAL_REFUSED, {"why": "request_state forged, altered or expired"})
            return tool_error(
                "Not proposed: the request state is not one Gatekeeper issued (or it expired). Call again."
            )
        await self.audit.event(ev.HANDOFF_RESUMED, bounded({"answer": self.handoff.answer(call)}), proposal_id=pid)
        outcome = await self.handoff.outcome(pid)
        if outcome is not None:
            return final_result(outcome)
        detail = await read_proposal(self.database, pid)
        if detail is None:
            return tool_error(f"No proposal {pid}.")
        return self._pending_result(
            pid,
            detail["path"],
            f"{detail['workspace']}/{detail['path']}",
            detail["size"],
            detail["sha256"],
            detail["expires_at"],
            repeat=False,
            mode=detail.get("mode") or "create",
            base=None if detail.get("base_sha256") is None else (detail["base_size"], detail["base_sha256"]),
        )


def unreachable(exc: DatabaseUnreachable, *, proposing: bool = False) -> CallToolResult:
    """The host's answer when the database server stays away: what happened, and what to do."""
    what = (
        "Proposal not confirmed: Gatekeeper's database is unreachable"
        if proposing
        else "Gatekeeper could not answer because its database is unreachable"
    )
    again = (
        "Call the tool again in a minute: an identical pending proposal is never recorded twice."
        if proposing
        else "Try again in a minute."
    )
    return tool_error(
        f"{what} ({exc.message}). {again} If it keeps failing, ask the person running Gatekeeper to check "
        "the database server and database_url."
    )


def _what(mode: str, path: str) -> str:
    """``append to notes/log.md``, ``edit notes/a.md``: the change in the host's words."""
    return f"append to {path}" if mode == "append" else f"{mode} {path}"


def _sizes(before: int, after: int) -> str:
    """``120 → 168 bytes (+48)``."""
    delta = after - before
    sign = "+" if delta >= 0 else "−"
    return f"{before:,} → {after:,} bytes ({sign}{abs(delta):,})"

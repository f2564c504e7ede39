"""Where a proposal stands, told to the agent: Gatekeeper's own read-only tool
``gatekeeper_proposal_status``, and the final answer of a call that waited for the decision."""

from __future__ import annotations

import math
import time
from typing import Any

import anyio
import anyio.to_thread

from gatekeeper.canonical import parse_ts, utc_now
from gatekeeper.proxy.protocol.mcp import CallToolResult, text_result, tool_error
from gatekeeper.store.follow import Changes
from gatekeeper.store.queries import Reader
from gatekeeper.store.target import Database

POLL_SECONDS = 0.05  # how often the change signal is looked at: one PRAGMA (PostgreSQL: its socket), no row read

FINAL = {"committed", "rejected", "conflict", "refused", "failed", "expired"}


async def read_proposal(database: Database, proposal_id: str) -> dict[str, Any] | None:
    """Everything about one proposal, content and events included (``Reader.proposal``)."""

    def read() -> dict[str, Any] | None:
        with Reader(database) as reader:
            return reader.proposal(proposal_id)

    return await anyio.to_thread.run_sync(read)


async def read_state(database: Database, proposal_id: str) -> dict[str, Any] | None:
    """Where one proposal stands (``Reader.proposal_state``: no content, no events)."""

    def read() -> dict[str, Any] | None:
        with Reader(database) as reader:
            return reader.proposal_state(proposal_id)

    return await anyio.to_thread.run_sync(read)


def summary(state: dict[str, Any]) -> dict[str, Any]:
    """The structured answer an agent gets, from ``Reader.proposal_state``. A create's is as it
    always was; a change's adds its mode and base (``outcome`` is then applied or deleted)."""
    out = {
        "proposal_id": state["id"],
        "status": state["status"],
        "destination": state["path"],
        "sha256": state["sha256"],
        "size": state["size"],
        "created_at": state["created_at"],
        "expires_at": state["expires_at"],
        "reviewer": state["reviewer"],
        "reason": state["reason"],
        "decided_at": state["decided_at"],
        "outcome": state["outcome"],
        "final_path": state["final_path"],
        "detail": state["detail"] or None,
    }
    mode = state.get("mode") or "create"
    if mode != "create":
        out |= {"mode": mode, "base_sha256": state["base_sha256"], "base_size": state["base_size"]}
    return out


def words(s: dict[str, Any]) -> str:
    mode = s.get("mode", "create")
    if mode == "create":
        approved, committed = "the file will be created shortly", f"the file exists at {s['final_path']}"
        conflict = "something already exists at the destination"
    else:
        approved = f"the {mode} will be applied shortly" if mode != "delete" else "the file will be deleted shortly"
        where = s["final_path"] or s["destination"]
        applied = f"the {mode} was applied to {where}"
        committed = f"the file was deleted ({where})" if s["outcome"] == "deleted" else applied
        conflict = "the file changed since it was proposed"
    said: str = {
        "pending": "waiting for a person to review it",
        "expired": "expired before anyone decided; propose again if it is still wanted",
        "approved": f"approved; {approved}",
        "rejected": f"rejected by {s['reviewer']}: {s['reason']}",
        "committed": f"committed: {committed}",
        "conflict": f"not written: {s['detail'] or conflict}",
        "refused": f"not written: {s['detail']}",
        "failed": f"not written: {s['detail']}",
    }.get(s["status"], s["status"])
    return said


async def proposal_status(database: Database, arguments: Any) -> CallToolResult:
    """gatekeeper_proposal_status: where a proposal stands, in words and as structured data."""
    pid = arguments.get("proposal_id") if isinstance(arguments, dict) else None
    if not isinstance(pid, str) or not pid:
        return tool_error("Pass proposal_id: the id a proposing call returned.")
    state = await read_state(database, pid)
    if state is None:
        return tool_error(f"No proposal {pid!r}. Use the proposal_id from the proposing call's result.")
    s = summary(state)
    text = f"Proposal {pid} for {state['path']}: {words(s)}."
    return text_result(text, s)


def final_result(s: dict[str, Any]) -> CallToolResult:
    """The answer to a proposing call once the outcome is known: success only when it is committed."""
    text = f"Proposal {s['proposal_id']} for {s['destination']}: {words(s)}."
    return text_result(text, s, is_error=s["status"] != "committed")


async def wait_for_outcome(
    database: Database, proposal_id: str, seconds: float, on_tick: Any = None, *, stop_while_pending: bool = False
) -> dict[str, Any] | None:
    """Wait until the proposal reaches a final state or time runs out; None on time-out.

    One read connection for the whole wait: the proposal's state is re-read only when the store's
    change signal moves (``store.follow.Changes``) or its expiry time passes (expiring writes no row).
    ``on_tick(elapsed)`` runs about once a second (progress notifications). With
    ``stop_while_pending`` a still-undecided proposal returns at once (a retried hand-off must
    never turn into an endless wait); an approved one waits for its commit.
    """
    start = anyio.current_time()
    next_tick = 0.0
    reader = await anyio.to_thread.run_sync(Reader, database)
    look: _Look | None = None
    try:
        look = await anyio.to_thread.run_sync(_Look, reader, proposal_id)  # PostgreSQL: connects to LISTEN
        while True:
            state = await anyio.to_thread.run_sync(look.state)
            if state is None:
                return None
            s = summary(state)
            if s["status"] in FINAL or (stop_while_pending and s["status"] == "pending"):
                return s
            elapsed = anyio.current_time() - start
            if elapsed >= seconds:
                return None
            if on_tick is not None and elapsed >= next_tick:
                await on_tick(elapsed)
                next_tick = elapsed + 1.0
            await anyio.sleep(POLL_SECONDS)
    finally:
        if look is not None:
            look.changes.close()
        reader.close()


class _Look:
    """One proposal's state, re-read only when it may have changed."""

    def __init__(self, reader: Reader, proposal_id: str) -> None:
        self.reader, self.proposal_id = reader, proposal_id
        self.changes = Changes(reader)
        self.last: dict[str, Any] | None = None
        self.expires = math.inf  # time.monotonic() at which a pending proposal turns expired

    def state(self) -> dict[str, Any] | None:
        if not self.changes.changed() and time.monotonic() < self.expires and self.last is not None:
            return self.last
        self.last = state = self.reader.proposal_state(self.proposal_id)
        self.expires = math.inf
        if state is not None and state["status"] == "pending":
            left = (parse_ts(state["expires_at"]) - utc_now()).total_seconds()
            self.expires = time.monotonic() + max(0.0, left)
        return state

"""The 2026-07-28 hand-off (SEP-2322): a proposing call answers with an ``InputRequiredResult``
whose URL elicitation sends the host's user to this proposal's review page, and a signed
``request_state`` naming the proposal. The retry gets the outcome if it is in, else the pending
result once: never a loop. What the host answers to the elicitation is never an approval."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types  # the wire types alone, not the SDK's transports
from itsdangerous import BadSignature, URLSafeTimedSerializer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gatekeeper.proxy.status import wait_for_outcome
from gatekeeper.store.target import Database

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext  # annotations only: the SDK loads with the server

STATE_MAX_AGE = 7 * 24 * 3600  # answered within a proposal's usual lifetime
RESUME_WAIT = 15.0  # on a retry, an approved proposal gets this long to be committed
REQUEST_KEY = "gatekeeper_review"
MESSAGE = (
    "A person must approve this proposed file on Gatekeeper's review page. Open the page, decide there, "
    "then continue: answering here does not approve anything."
)


class HandOff:
    def __init__(self, key: bytes, database: Database) -> None:
        self.database = database
        self._states = URLSafeTimedSerializer(key, salt="gatekeeper.proxy.request-state")

    @staticmethod
    def available(ctx: ServerRequestContext[Any]) -> bool:
        """Only 2026-07-28 hosts that declared URL-mode elicitation."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return False
        caps = ctx.session.client_capabilities
        return bool(caps and caps.elicitation and caps.elicitation.url is not None)

    def request(self, proposal_id: str, review_url: str) -> types.InputRequiredResult:
        return types.InputRequiredResult(
            input_requests={
                REQUEST_KEY: types.ElicitRequest(params=types.ElicitRequestURLParams(message=MESSAGE, url=review_url))
            },
            request_state=self._states.dumps({"p": proposal_id}),
        )

    def proposal_of(self, state: Any) -> str | None:
        """The proposal a request_state names, or None if it is not ours, altered or expired."""
        try:
            data = self._states.loads(state, max_age=STATE_MAX_AGE) if isinstance(state, str) else None
        except BadSignature:
            return None
        pid = data.get("p") if isinstance(data, dict) else None
        return pid if isinstance(pid, str) else None

    @staticmethod
    def answer(ctx: ServerRequestContext[Any]) -> str | None:
        """What the host said to the elicitation (recorded, never trusted)."""
        answers = (ctx.params or {}).get("inputResponses")
        if not isinstance(answers, dict) or not isinstance(answers.get(REQUEST_KEY), dict):
            return None
        action = answers[REQUEST_KEY].get("action")
        return action if isinstance(action, str) else None

    async def outcome(self, proposal_id: str) -> dict[str, Any] | None:
        """The final summary if the decision is in (waiting a little for an approved one's commit)."""
        outcome = await wait_for_outcome(self.database, proposal_id, RESUME_WAIT, stop_while_pending=True)
        return outcome if outcome is not None and outcome["status"] != "pending" else None

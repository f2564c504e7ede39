"""The 2026-07-28 hand-off (SEP-2322): a proposing call answers with an ``input_required`` result
whose URL elicitation sends the host's user to this proposal's review page, and a signed
``request_state`` naming the proposal. The retry gets the outcome if it is in, else the pending
result once: never a loop. What the host answers to the elicitation is never an approval."""

from __future__ import annotations

from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer

from gatekeeper.proxy.host.call import HostCall
from gatekeeper.proxy.protocol.mcp import InputRequiredResult, input_required
from gatekeeper.proxy.status import wait_for_outcome
from gatekeeper.store.target import Database

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
    def available(call: HostCall) -> bool:
        """Only 2026-07-28 hosts that declared URL-mode elicitation."""
        return call.modern and call.url_elicitation()

    def request(self, proposal_id: str, review_url: str) -> InputRequiredResult:
        return input_required(REQUEST_KEY, MESSAGE, review_url, self._states.dumps({"p": proposal_id}))

    def proposal_of(self, state: Any) -> str | None:
        """The proposal a request_state names, or None if it is not ours, altered or expired."""
        try:
            data = self._states.loads(state, max_age=STATE_MAX_AGE) if isinstance(state, str) else None
        except BadSignature:
            return None
        pid = data.get("p") if isinstance(data, dict) else None
        return pid if isinstance(pid, str) else None

    @staticmethod
    def answer(call: HostCall) -> str | None:
        """What the host said to the elicitation (recorded, never trusted)."""
        answers = call.params.get("inputResponses")
        if not isinstance(answers, dict) or not isinstance(answers.get(REQUEST_KEY), dict):
            return None
        action = answers[REQUEST_KEY].get("action")
        return action if isinstance(action, str) else None

    async def outcome(self, proposal_id: str) -> dict[str, Any] | None:
        """The final summary if the decision is in (waiting a little for an approved one's commit)."""
        outcome = await wait_for_outcome(self.database, proposal_id, RESUME_WAIT, stop_while_pending=True)
        return outcome if outcome is not None and outcome["status"] != "pending" else None

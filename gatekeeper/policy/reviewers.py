"""Reviewers for what they know (issue 15): ``reviewers.NAME.servers`` / ``globs`` limit what a
reviewer may decide, and a rule's ``approvals: N`` asks for N distinct reviewers.

A reviewer the policy does not list may decide everything (as before there were scopes). Both the
review side (at decide time) and the committer (at commit time, from the policy as it is then)
ask the same two questions here, so a scope tightened in between wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, StrictStr

from gatekeeper.names import REVIEWER
from gatekeeper.policy.globs import glob_match
from gatekeeper.policy.messages import fail
from gatekeeper.policy.scalars import Glob, ServerName

if TYPE_CHECKING:
    from gatekeeper.policy.model import Policy

__all__ = ["MAX_APPROVALS", "ReviewerName", "ReviewerScope", "approvals_needed", "scope_problem"]

MAX_APPROVALS = 5


def _check_reviewer_name(name: str) -> str:
    if not REVIEWER.allows(name):
        fail(f"reviewer name {name!r} {REVIEWER.rule}")
    return name


ReviewerName = Annotated[StrictStr, AfterValidator(_check_reviewer_name)]


class ReviewerScope(BaseModel):
    """What one reviewer may decide: proposals for these servers (all, if left out) whose path
    matches one of these globs (any path, if left out)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    servers: tuple[ServerName, ...] | None = None
    globs: tuple[Glob, ...] | None = None

    def allows(self, server: str, path: str) -> bool:
        in_servers = self.servers is None or server in self.servers
        return in_servers and (self.globs is None or any(glob_match(g, path) for g in self.globs))


def check_scopes(reviewers: Mapping[str, ReviewerScope], servers: Mapping[str, object]) -> None:
    """Every server a scope names is one of the policy's (called by ``Policy``'s validator)."""
    for name, scope in reviewers.items():
        for server in scope.servers or ():
            if server not in servers:
                known = ", ".join(repr(s) for s in servers)
                fail(f"reviewer {name!r} is given server {server!r}, which the policy does not have (it has {known})")


def scope_problem(policy: Policy, reviewer: str, server: str, path: str) -> str | None:
    """Why ``reviewer`` may not decide a proposal at ``path`` for ``server`` (None: they may)."""
    scope = policy.reviewers.get(reviewer)
    if scope is None or scope.allows(server, path):
        return None
    servers = ", ".join(scope.servers) if scope.servers is not None else "any server"
    globs = " or ".join(scope.globs) if scope.globs is not None else "any path"
    return (
        f"reviewer {reviewer!r} may decide only {servers} at {globs} (policy: reviewers.{reviewer}), "
        f"not {server} at {path!r}"
    )


def approvals_needed(policy: Policy, server: str, tool: str, path: str) -> int:
    """How many distinct reviewers must approve a proposal of ``server``.``tool`` at ``path``: the
    rule's ``approvals``; for a tool no rule names (a revert), the most any of the server's rules
    that allow the path asks for, so a revert needs no fewer approvals than the write it undoes."""
    found = policy.servers.get(server)
    if found is None:
        return 1  # the committer refuses it for the missing server anyway
    rule = found.tools.get(tool)
    if rule is not None:
        return rule.propose.approvals if rule.propose is not None else 1
    allowing = [r.propose.approvals for r in found.tools.values() if r.propose is not None and r.propose.allows(path)]
    return max(allowing, default=1)

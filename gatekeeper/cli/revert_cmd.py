"""``gatekeeper revert``: file a new proposal that restores what a committed proposal changed.

It goes through review like any other proposal; nothing on disk changes here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gatekeeper.canonical import sha256_hex
from gatekeeper.cli.context import POLICY, Ctx, pass_ctx
from gatekeeper.cli.output import emit_json
from gatekeeper.errors import Conflict, NotFound

if TYPE_CHECKING:
    from gatekeeper.workspace.reading import Found


@click.command()
@click.argument("proposal_id")
@click.option(
    "--over-changes",
    is_flag=True,
    help="Propose even if the file changed after PROPOSAL_ID: restore its old bytes over what is there now.",
)
@POLICY
@click.option("--json", "as_json", is_flag=True, help="Print the new proposal as one JSON object.")
@pass_ctx
def revert(ctx: Ctx, proposal_id: str, over_changes: bool, policy_file: str | None, as_json: bool) -> None:
    """Propose restoring what committed proposal PROPOSAL_ID changed; a reviewer decides.

    PROPOSAL_ID may be any unique prefix of the id. A created file is proposed for deletion, a
    replaced, appended or edited file for replacement with its old bytes, a deleted file for
    creation with them. The file must still
    be what PROPOSAL_ID left (else the revert would also undo later changes: say so with
    --over-changes). Prints the new proposal's id and review URL.
    """
    from gatekeeper.commit.revert import plan_revert, revert_draft
    from gatekeeper.policy import load_policy
    from gatekeeper.policy.propose import DEFAULT_EXPIRES_AFTER
    from gatekeeper.store.lookup import resolve
    from gatekeeper.store.version import check_schema

    home = ctx.home.require()
    check_schema(home.database)
    policy = load_policy(policy_file, home=home.path)
    with home.reader() as reader:
        proposal_id = resolve(reader, proposal_id, "`gatekeeper audit proposals --status committed` lists them")
        detail = reader.proposal(proposal_id)
    if detail is None:
        raise NotFound(f"no proposal {proposal_id}", "`gatekeeper audit proposals --status committed` lists them")
    plan = plan_revert(detail, _current(detail), over_changes=over_changes)
    rule = policy.rule(detail["server"], detail["tool"]) if detail["server"] in policy.servers else None
    expires_after = rule.propose.expires_after if rule and rule.propose else DEFAULT_EXPIRES_AFTER
    draft = revert_draft(detail, plan, policy_digest=policy.digest, expires_after=expires_after)
    with home.store() as store:
        proposed = store.propose(draft, ctx.actor, reverts=proposal_id)
    url = f"{policy.review_url}/proposals/{proposed.id}"
    if as_json:
        emit_json(
            {
                "proposal_id": proposed.id,
                "created": proposed.created,
                "reverts": proposal_id,
                "mode": plan.mode,
                "path": detail["path"],
                "sha256": proposed.sha256,
                "size": proposed.size,
                "base_sha256": None if plan.base is None else sha256_hex(plan.base),
                "expires_at": proposed.expires_at,
                "review_url": url,
                "note": plan.note or None,
            }
        )
        return
    if plan.note:
        click.echo(f"Note: {plan.note}.", err=True)
    said = "Proposed" if proposed.created else "Already pending"
    click.echo(f"{said}: {proposed.id} ({plan.mode} {detail['path']}, reverting {proposal_id})")
    click.echo(f"Review it here: {url}")


def _current(detail: dict[str, Any]) -> Found:
    """What is at the proposal's destination now, read beneath its workspace without following
    symlinks; refused when the workspace root itself now leads elsewhere."""
    from gatekeeper.commit.revert import READ_LIMIT
    from gatekeeper.workspace.reading import read_at

    workspace, pid = Path(detail["workspace"]), detail["id"]
    real = detail["workspace_real"] or detail["workspace"]
    if os.path.realpath(workspace) != real:
        raise Conflict(
            f"the workspace {workspace} now resolves to {os.path.realpath(workspace)}, not {real} as when "
            f"proposal {pid} was made",
            f"restore by hand: `gatekeeper audit show {pid} --base` prints the old bytes",
        )
    try:
        return read_at(workspace, detail["path"], READ_LIMIT)
    except OSError as exc:
        raise Conflict(f"cannot read {workspace / detail['path']}: {exc.strerror or exc}") from None

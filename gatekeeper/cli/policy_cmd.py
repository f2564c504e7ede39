"""``gatekeeper policy``: load policy.yaml, report every problem precisely, print the rules."""

from __future__ import annotations

import click

from gatekeeper.cli.context import Ctx, pass_ctx
from gatekeeper.cli.output import emit_json, table


@click.group()
def policy() -> None:
    """Check and show the policy (which tools are allowed, proposed or denied)."""


@policy.command()
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False),
    envvar="GATEKEEPER_POLICY",
    help="Policy file. Default: $GATEKEEPER_POLICY, ./policy.yaml, then policy.yaml in the home.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per rule.")
@pass_ctx
def check(ctx: Ctx, policy_file: str | None, as_json: bool) -> None:
    """Load the policy, report problems, and print the effective rules."""
    from gatekeeper.policy import load_policy

    pol = load_policy(policy_file, home=ctx.home.path)
    rows = pol.describe()
    problems = pol.check_workspaces()
    if as_json:
        for row in rows:
            emit_json(row)
    else:
        table(
            f"{pol.source} (digest {pol.digest[:12]})",
            ("host name", "server", "tool", "action", "path", "content", "globs", "max bytes"),
            (
                (
                    r["host_name"],
                    r["server"],
                    r["tool"],
                    r["action"],
                    r.get("path") or "",
                    r.get("content") or "",
                    " ".join(r.get("globs") or []),
                    r.get("max_bytes") or "",
                )
                for r in rows
            ),
        )
        click.echo("Tools not named above are denied.")
    for problem in problems:
        click.echo(f"Warning: {problem}", err=True)

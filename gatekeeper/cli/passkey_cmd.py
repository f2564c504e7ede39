"""``gatekeeper reviewer enrol | passkeys | passkey-remove``: a reviewer's passkeys from the CLI.

The passkey itself is made in the browser, on the one-time enrolment link printed here (WebAuthn
needs the page's origin: a team's public ``review_url``, else ``localhost``, never an IP address).
"""

from __future__ import annotations

import click

from gatekeeper.cli.context import POLICY, Ctx, pass_ctx
from gatekeeper.cli.output import emit_json, table
from gatekeeper.errors import PolicyError


def review_origin(ctx: Ctx, policy_file: str | None) -> str:
    """The origin passkeys are made for, from the policy's review_url (else the default): its own
    at a team's public name, else the same with host ``localhost``."""
    from gatekeeper.policy import load_policy
    from gatekeeper.policy.model import DEFAULT_REVIEW_URL
    from gatekeeper.trust.approval import RelyingParty

    try:
        url = load_policy(policy_file, home=ctx.home.path).review_url
    except PolicyError as exc:
        click.echo(f"note: no policy read ({exc}); the link assumes {DEFAULT_REVIEW_URL}", err=True)
        url = DEFAULT_REVIEW_URL
    return RelyingParty.for_review_url(url).origins[0]


def print_enrolment_link(ctx: Ctx, name: str, policy_file: str | None, origin: str | None = None) -> None:
    """Issue a one-time enrolment token for ``name`` (an event) and print its link (at ``origin``:
    `gatekeeper up` knows the port it listens on; else the policy's review_url says)."""
    from gatekeeper.origins import public_origin
    from gatekeeper.store.passkeys import ENROLMENT_TTL

    with ctx.home.require().store() as store:
        token = store.issue_enrolment(name, actor=ctx.actor)
    hours = int(ENROLMENT_TTL.total_seconds() // 3600)
    origin = origin or review_origin(ctx, policy_file)
    where = f"give it to {name} only" if public_origin(origin) else "open it on this machine"
    click.echo(f"Passkey enrolment link for {name} (works once, for {hours} hours; {where}):")
    click.echo(f"{origin}/enrol/{token}")


@click.command("enrol")
@click.argument("name")
@POLICY
@pass_ctx
def enrol(ctx: Ctx, name: str, policy_file: str | None) -> None:
    """Print a fresh one-time link where NAME enrols a passkey."""
    print_enrolment_link(ctx, name, policy_file)


@click.command("passkeys")
@click.argument("name")
@click.option("--all", "show_all", is_flag=True, help="Also list removed passkeys.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@pass_ctx
def passkeys(ctx: Ctx, name: str, show_all: bool, as_json: bool) -> None:
    """List NAME's passkeys (credential id, label, when added, removed)."""
    with ctx.home.require().store() as store:
        rows = store.passkeys(name, removed=show_all)
    if as_json:
        for p in rows:
            emit_json(
                {
                    "credential_id": p.credential_id,
                    "label": p.label,
                    "created_at": p.created_at,
                    "removed_at": p.removed_at,
                    "sign_count": p.sign_count,
                }
            )
        return
    table(
        f"{len(rows)} passkey(s) of {name}",
        ("credential", "label", "added", "state"),
        (
            (p.credential_id, p.label, p.created_at, f"removed {p.removed_at}" if p.removed_at else "active")
            for p in rows
        ),
    )


@click.command("passkey-remove")
@click.argument("name")
@click.argument("credential")
@pass_ctx
def passkey_remove(ctx: Ctx, name: str, credential: str) -> None:
    """Remove NAME's passkey CREDENTIAL for good (approvals made with it before stay valid)."""
    with ctx.home.require().store() as store:
        store.remove_passkey(name, credential, actor=ctx.actor)
    click.echo(f"Removed passkey {credential} of {name}.")

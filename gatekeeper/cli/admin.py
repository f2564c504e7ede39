"""``gatekeeper init`` and ``gatekeeper db``: create the home, migrate the database."""

from __future__ import annotations

from typing import IO

import click

from gatekeeper.cli.context import Ctx, pass_ctx
from gatekeeper.cli.output import emit_json
from gatekeeper.errors import HomeMissing
from gatekeeper.store import events as ev


@click.command()
@click.option(
    "--public-keys",
    type=click.File("r"),
    metavar="FILE",
    help="A verify-only home (a committer's or auditor's machine): import the public keys `gatekeeper keys "
    "export-public` printed on the review side (- for stdin) and make no private key.",
)
@pass_ctx
def init(ctx: Ctx, public_keys: IO[str] | None) -> None:
    """Create the home (0700), the migrated database and secret.key (0600).

    Safe to run again: it creates only what is missing.
    """
    from gatekeeper.home import make_verify_only, setup_home

    home = ctx.home
    imported = None if public_keys is None else make_verify_only(home, public_keys.read())
    result = setup_home(home, ctx.actor, by="init")
    for name in result.tightened:
        click.echo(f"Made {home.path / name} private (mode 0600); it was readable by others")
    if result.changed:
        click.echo(f"Initialised Gatekeeper home at {home.path}")
    else:
        click.echo(f"Gatekeeper home at {home.path} is already initialised; nothing to do")
    click.echo(f"  database   {home.database}")
    click.echo(f"  secret key  {home.key_path} (mode 0600; keep it out of backups you share)")
    if home.keys.has_private():
        click.echo(f"  decision key {home.keys.private_path} (Ed25519, mode 0600; only the review side needs it)")
    else:
        new = f", {len(imported)} imported now" if imported is not None else ""
        click.echo(
            f"  public keys {home.keys.folder} ({len(home.keys.public_ids())}{new}; no private key: this machine "
            "commits and verifies, it never approves)"
        )


@click.group()
def db() -> None:
    """Database schema: status and upgrade."""


def _existing_home(ctx: Ctx) -> None:
    if not ctx.home.path.is_dir():
        raise HomeMissing(f"no Gatekeeper home at {ctx.home.path}", "run `gatekeeper init` first")


@db.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@pass_ctx
def db_status(ctx: Ctx, as_json: bool) -> None:
    """Show the schema revision of the database and the revisions still to apply.

    Exits 1 when an upgrade is needed.
    """
    from gatekeeper.store import migrate

    _existing_home(ctx)
    st = migrate.status(ctx.home.database)
    if as_json:
        emit_json(
            {
                "database": str(ctx.home.database),  # a server's URL without its password
                "current": st.current,
                "head": st.head,
                "pending": list(st.pending),
                "up_to_date": st.up_to_date,
            }
        )
    elif st.up_to_date:
        click.echo(f"{ctx.home.database}: schema {st.current} (up to date)")
    else:
        click.echo(f"{ctx.home.database}: schema {st.current or 'none'}; pending: {', '.join(st.pending)}")
        click.echo("  → run `gatekeeper db upgrade`")
    if not st.up_to_date:
        raise SystemExit(1)


@db.command("upgrade")
@pass_ctx
def db_upgrade(ctx: Ctx) -> None:
    """Apply pending migrations, each revision in its own transaction."""
    from gatekeeper.store import migrate

    _existing_home(ctx)
    before = migrate.upgrade(ctx.home.database)
    if before.up_to_date:
        click.echo(f"{ctx.home.database}: already at {before.head}; nothing to do")
        return
    from gatekeeper.store.store import Store

    with Store(ctx.home.database, keys_dir=ctx.home.keys.folder) as store:
        store.append_event(
            ev.DB_UPGRADE,
            ctx.actor,
            {"from": before.current, "to": before.head, "applied": list(before.pending)},
        )
    click.echo(f"{ctx.home.database}: upgraded {before.current or 'blank'} → {before.head}")

"""``gatekeeper keys``: the Ed25519 keys that sign decisions, reviewer rows and checkpoints.

The review side holds the private key; committers and auditors on other machines import only the
public keys (``export-public`` here, ``import-public`` there), so they can verify but never approve.
"""

from __future__ import annotations

from typing import IO

import click

from gatekeeper.cli.context import Ctx, pass_ctx
from gatekeeper.cli.output import emit_json
from gatekeeper.store import events as ev


@click.group()
def keys() -> None:
    """Ed25519 signing keys: list, rotate, export and import public keys."""


@keys.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_ctx
def list_keys(ctx: Ctx, as_json: bool) -> None:
    """Every public key kept here, and which one signs now (on the review side)."""
    k = ctx.home.keys
    current = k.signer().key_id if k.has_private() else None
    ids = k.public_ids()
    if as_json:
        emit_json({"keys": ids, "signing": current, "hmac_until": k.legacy_hmac_until()})
        return
    if not ids:
        click.echo(f"No keys in {k.folder}: run `gatekeeper init` (review side) or `gatekeeper keys import-public`.")
    for kid in ids:
        click.echo(f"{kid}  {'signing (private key here)' if kid == current else 'verify only'}")


@keys.command()
@pass_ctx
def rotate(ctx: Ctx) -> None:
    """Make a new key pair: new signatures use it; old public keys stay to verify what they signed."""
    home = ctx.home.require()
    old = home.keys.signer().key_id
    new = home.keys.rotate()
    with home.store() as store:
        store.append_event(ev.KEY_ROTATED, ctx.actor, {"old_key_id": old, "key_id": new})
    click.echo(f"New signing key {new}; {old} is kept to verify what it signed.")
    click.echo("Give the committers' machines the new public key: `gatekeeper keys export-public`.")


@keys.command("export-public")
@pass_ctx
def export_public(ctx: Ctx) -> None:
    """Print every public key (JSON) for `gatekeeper keys import-public` on another machine."""
    click.echo(ctx.home.keys.export_public())


@keys.command("import-public")
@click.argument("source", type=click.File("r"), default="-")
@pass_ctx
def import_public(ctx: Ctx, source: IO[str]) -> None:
    """Add the public keys `export-public` printed (a file, or - for stdin)."""
    ctx.home.create()
    added = ctx.home.keys.import_public(source.read())
    click.echo(f"Imported {len(added)} new public key(s): {', '.join(added) or 'none'}.")

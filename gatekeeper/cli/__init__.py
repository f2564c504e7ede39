"""The ``gatekeeper`` command: a thin edge that turns options into domain calls and
domain errors into one clear line on stderr (never a traceback).

Every command runs under ``PRIVATE_UMASK`` (0o077): the proxy, review page, committer, ``up``
and its children, ``init`` and ``audit`` all may create files in the home (the database's
``-wal`` and ``-shm``, logs, ``commit.lock``), and each must be private from its first byte.

Each subcommand module imports only what it runs, so ``gatekeeper proxy`` never pays for
FastAPI and ``gatekeeper audit`` never loads Alembic.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from gatekeeper import __version__
from gatekeeper.cli import admin, audit, commit_cmd, host_cmd, policy_cmd, proxy_cmd, revert_cmd, review_cmd, up_cmd
from gatekeeper.cli.context import Ctx
from gatekeeper.errors import GatekeeperError
from gatekeeper.home import go_private


class Group(click.Group):
    """Turns a ``GatekeeperError`` anywhere below into ``Error: ...`` and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GatekeeperError as exc:
            click.echo(f"Error: {exc.message}", err=True)
            if exc.hint:
                click.echo(f"  → {exc.hint}", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=str),
    envvar="GATEKEEPER_HOME",
    help="State folder (database, secret.key). Default: $GATEKEEPER_HOME, else the user data folder.",
)
@click.version_option(__version__, prog_name="gatekeeper")
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """Gatekeeper: every write an AI agent makes through MCP waits for a person's approval."""
    previous = go_private()
    ctx.call_on_close(lambda: os.umask(previous))  # for in-process callers (tests); a process just exits
    ctx.obj = Ctx(home)


cli.add_command(admin.init)
cli.add_command(admin.db)
cli.add_command(audit.audit)
cli.add_command(policy_cmd.policy)
cli.add_command(proxy_cmd.proxy)
cli.add_command(review_cmd.review)
cli.add_command(review_cmd.reviewer)
cli.add_command(host_cmd.host_config)
cli.add_command(commit_cmd.commit)
cli.add_command(revert_cmd.revert)
cli.add_command(up_cmd.up)


def main() -> None:
    cli(prog_name="gatekeeper")

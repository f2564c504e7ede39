"""The ``gatekeeper`` command: a thin edge that turns options into domain calls and
domain errors into one clear line on stderr (never a traceback).

Every command runs under ``PRIVATE_UMASK`` (0o077): the proxy, review page, committer, ``up``
and its children, ``init`` and ``audit`` all may create files in the home (the database's
``-wal`` and ``-shm``, logs, ``commit.lock``), and each must be private from its first byte.

Each subcommand module imports only what it runs, and is itself imported only when its command
runs (``LAZY``), so ``gatekeeper proxy`` never pays for FastAPI, rich or the other commands, and
``gatekeeper audit`` never loads Alembic.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from gatekeeper import __version__
from gatekeeper.cli.context import Ctx
from gatekeeper.errors import GatekeeperError
from gatekeeper.home import go_private

# command name -> (module in gatekeeper.cli, attribute): imported on first use
LAZY: dict[str, tuple[str, str]] = {
    "init": ("admin", "init"),
    "db": ("admin", "db"),
    "audit": ("audit", "audit"),
    "policy": ("policy_cmd", "policy"),
    "proxy": ("proxy_cmd", "proxy"),
    "review": ("review_cmd", "review"),
    "reviewer": ("review_cmd", "reviewer"),
    "host-config": ("host_cmd", "host_config"),
    "commit": ("commit_cmd", "commit"),
    "revert": ("revert_cmd", "revert"),
    "up": ("up_cmd", "up"),
    "keys": ("keys_cmd", "keys"),
}


class Group(click.Group):
    """Turns a ``GatekeeperError`` anywhere below into ``Error: ...`` and its exit code, and
    imports a subcommand's module only when that command is looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY:
            module, attr = LAZY[cmd_name]
            command = getattr(importlib.import_module(f"gatekeeper.cli.{module}"), attr)
            assert isinstance(command, click.Command) and command.name == cmd_name, cmd_name
            self.add_command(command)
        return self.commands.get(cmd_name)

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


def main() -> None:
    cli(prog_name="gatekeeper")

"""What every subcommand shares: the resolved home, who is acting, and the ``--policy`` option."""

from __future__ import annotations

import getpass
from functools import cached_property

import click

from gatekeeper.home import Home, resolve_home


class Ctx:
    def __init__(self, home: str | None) -> None:
        self._home_arg = home

    @cached_property
    def home(self) -> Home:
        return Home(resolve_home(self._home_arg))

    @property
    def actor(self) -> str:
        try:
            return f"cli:{getpass.getuser()}"
        except (KeyError, OSError):
            return "cli"


pass_ctx = click.make_pass_decorator(Ctx)

# One declaration for every command that reads the policy, so the default order is stated once.
POLICY = click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False),
    envvar="GATEKEEPER_POLICY",
    help="Policy file. Default: $GATEKEEPER_POLICY, ./policy.yaml, then policy.yaml in the home.",
)

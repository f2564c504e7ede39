"""What every subcommand shares: the resolved home, and who is acting."""

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

"""Output for people (rich tables on a terminal) and for scripts (``--json``: one object a line)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table


def console() -> Console:
    # Off a terminal, do not squeeze columns into 80 characters: ids and digests must stay whole.
    return Console(
        soft_wrap=True, width=None if sys.stdout.isatty() else 200, highlight=False, markup=False, emoji=False
    )


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, sort_keys=True, default=str))


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    t = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        t.add_column(column, overflow="fold")
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    console().print(t)


def kv(title: str, pairs: Sequence[tuple[str, Any]]) -> None:
    t = Table(title=title, show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    for key, value in pairs:
        t.add_row(key, "" if value is None else str(value))
    console().print(t)

"""Output for people (tables that fit the terminal) and for scripts (``--json``: one object a line).

Tables fit ``width()`` columns: ``$COLUMNS`` when set, else the terminal's width, else 80 (a pipe
or a file: what a pager or an e-mail shows). A column is one of three kinds, so that a narrow
terminal never breaks an id, a status or a tool name over two lines: ``word`` cells stay whole,
``fold`` cells (paths, free text) wrap inside their column, ``cut`` cells (an event's payload)
keep one line and end in "…". ``--wide`` (``wide=True``) drops the limit: every column, each
line as long as its content. Exact values (whole ids, ISO instants, byte counts) are in ``--json``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import click
from rich import box
from rich.console import Console
from rich.table import Table

DEFAULT_WIDTH = 80
UNLIMITED = 100_000  # --wide: no line is cut or folded, however long
WIDE = click.option("--wide", is_flag=True, help="Every column, whole ids and exact values; lines may be long.")


@dataclass(frozen=True)
class Col:
    """A table column: ``word`` never breaks, ``fold`` wraps in its cell, ``cut`` ends in "…"."""

    name: str
    fit: Literal["word", "fold", "cut"] = "fold"
    right: bool = False  # numbers: aligned on their last digit


def width() -> int:
    """Columns to fit: ``$COLUMNS`` (set by shells and tests), the terminal's own, else 80."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    if sys.stdout.isatty():
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def console(wide: bool = False) -> Console:
    return Console(
        soft_wrap=False,
        width=UNLIMITED if wide else width(),
        highlight=False,
        markup=False,
        emoji=False,
        color_system="auto" if sys.stdout.isatty() else None,
    )


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, sort_keys=True, default=str))


def table(
    title: str | None, columns: Sequence[str | Col], rows: Iterable[Sequence[Any]], *, wide: bool = False
) -> None:
    """Rows under a one-line header, columns two spaces apart, fitted to ``width()`` (see ``Col``)."""
    cols = [c if isinstance(c, Col) else Col(c) for c in columns]
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    t = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0)
    )
    room = _room(cols, cells)
    for col in cols:
        t.add_column(
            col.name,
            header_style="bold",
            no_wrap=wide or col.fit != "fold",
            overflow="ellipsis" if col.fit == "cut" and not wide else "fold",
            justify="right" if col.right else "left",
            max_width=None if wide or col.fit != "cut" else room,
        )
    for row in cells:
        t.add_row(*row)
    _print(t, wide)


def _room(cols: Sequence[Col], cells: Sequence[Sequence[str]]) -> int:
    """What is left for a ``cut`` column once every other column has its widest cell (at least 12).
    Columns are 2 apart: a space of padding and the box's blank divider."""
    taken = sum(max([len(c.name), *(len(row[i]) for row in cells)]) for i, c in enumerate(cols) if c.fit != "cut")
    cut = sum(1 for c in cols if c.fit == "cut") or 1
    return max(12, (width() - taken - 2 * (len(cols) - 1)) // cut)


def kv(title: str, pairs: Sequence[tuple[str, Any]], *, wide: bool = False) -> None:
    """Labelled lines: the label stays whole, the value wraps beside it."""
    t = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold", no_wrap=wide)
    for key, value in pairs:
        t.add_row(key, "" if value is None else str(value))
    _print(t, wide)


def say(text: str) -> None:
    """A sentence for people, wrapped at ``width()`` between words (a long path folds)."""
    out = console()
    with out.capture() as captured:
        out.print(text, overflow="fold")
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def _print(renderable: Table, wide: bool) -> None:
    """Render, then print without the spaces rich pads each line out with."""
    out = console(wide)
    with out.capture() as captured:
        out.print(renderable)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))

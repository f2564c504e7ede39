"""The CLI reference (every command's --help) as Markdown, for README.md.

`python scripts/cli_reference.py --write` rewrites the part of README.md between the
`<!-- cli-reference -->` markers; tests/test_docs.py fails when the two drift apart.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click

from gatekeeper.cli import cli

BEGIN, END = "<!-- cli-reference -->", "<!-- /cli-reference -->"


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name in sorted(group.commands):
        command = group.commands[name]
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


def help_text(path: tuple[str, ...]) -> str:
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="gatekeeper", terminal_width=100)
    return result.output.rstrip()


def reference() -> str:
    parts = ["```text", "$ gatekeeper --help", help_text(()), "```"]
    for path, _ in commands(cli):
        parts += ["", "```text", f"$ gatekeeper {' '.join(path)} --help", help_text(path), "```"]
    return "\n".join(parts)


def write_readme(readme: Path) -> None:
    text = readme.read_text()
    start = text.index(BEGIN) + len(BEGIN) + 1
    end = text.index(END)
    readme.write_text(text[:start] + reference() + "\n" + text[end:])


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_readme(Path(__file__).resolve().parent.parent / "README.md")
    else:
        print(reference())

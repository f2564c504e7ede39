"""``python -m gatekeeper.commit ARGS`` is ``gatekeeper ARGS`` with the ``commit`` command registered.

For running the committer before (or without) its registration in ``gatekeeper.cli``:
``python -m gatekeeper.commit commit --once``.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> None:
    from gatekeeper.cli import cli
    from gatekeeper.cli.commit_cmd import commit

    if "commit" not in cli.commands:
        cli.add_command(commit)
    cli.main(args=argv, prog_name="gatekeeper")


if __name__ == "__main__":
    main()

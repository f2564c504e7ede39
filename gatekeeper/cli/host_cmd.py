"""``gatekeeper host-config``: the entry to paste into a host's MCP configuration.

A desktop host starts the entry with only its ``env`` and the host's own minimal ``PATH``
(often ``/usr/bin:/bin``), from ``/``. So the entry carries a ``PATH`` of its own: the folder of
the interpreter running Gatekeeper first (a bare ``python`` in the policy then means a Python
that has Gatekeeper installed, as the demo notes server needs), then the folders where each
server's bare command is found on the current ``PATH``, then ``/usr/local/bin:/usr/bin:/bin``.
The entry is checked as the host will start it, and refused if a server could not start.
A ``url`` server's header secrets are not written into the entry (its output is often pasted
or shared); a note on stderr names each variable the entry's ``env`` must add.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from gatekeeper.cli.context import POLICY, Ctx, pass_ctx
from gatekeeper.errors import GatekeeperError

HOST_PATH = "/usr/bin:/bin"  # what a desktop host gives, at least
SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")


@click.command("host-config")
@POLICY
@click.option("--name", default="gatekeeper", show_default=True, help="The server's name in the host's list.")
@pass_ctx
def host_config(ctx: Ctx, policy_file: str | None, name: str) -> None:
    """Print the mcpServers JSON entry (absolute paths) that launches `gatekeeper proxy`.

    Paste it into the host's configuration, e.g. Claude Desktop's claude_desktop_config.json,
    Cursor's .cursor/mcp.json or VS Code's mcp.json (under "servers" there). The entry sets
    PATH itself (this Python's folder, the folders of the servers' commands, then the system
    folders), because hosts start it with almost no environment; it is refused when a server's
    command would not start that way.
    """
    from gatekeeper.policy import load_policy
    from gatekeeper.policy.commands import child_env, command_problems, resolve_server

    policy = load_policy(policy_file, home=ctx.home.path)
    folders = [str(Path(sys.executable).absolute().parent)]
    for server in policy.servers.values():
        if server.command is None:
            continue  # reached over HTTP
        found = resolve_server(server)
        if "/" not in server.command and found.path is not None:
            folders.append(os.path.dirname(found.path))
    folders += SYSTEM_PATH
    env = {"GATEKEEPER_HOME": str(ctx.home.path), "PATH": os.pathsep.join(dict.fromkeys(folders))}
    # The proxy as the host starts it: the host's few variables, its PATH, then the entry's env.
    as_launched = child_env(env, {**os.environ, "PATH": HOST_PATH})
    problems = command_problems(policy, as_launched)
    if problems:
        raise GatekeeperError(
            "\n".join(["a host could not start every server in this policy:", *problems]),
            "fix the command (an absolute path always works), then run this again",
        )
    entry = {
        "command": str(Path(sys.executable).absolute()),
        "args": ["-m", "gatekeeper", "proxy", "--policy", str(policy.source)],
        "env": env,
    }
    click.echo(json.dumps({"mcpServers": {name: entry}}, indent=2))
    for server_name, server in policy.servers.items():
        for header, source in server.headers.items():
            click.echo(
                f"Note: server {server_name!r} sends {header} from ${source.env}, and a host starts the proxy with "
                f'only the entry\'s env: add "{source.env}": "<its value>" to "env" above (not printed here: '
                "it is a secret)",
                err=True,
            )

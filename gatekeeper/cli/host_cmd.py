"""``gatekeeper host-config``: the entry to paste into a host's MCP configuration."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from gatekeeper.cli.context import Ctx, pass_ctx


@click.command("host-config")
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False),
    envvar="GATEKEEPER_POLICY",
    help="Policy file. Default: $GATEKEEPER_POLICY, ./policy.yaml, then policy.yaml in the home.",
)
@click.option("--name", default="gatekeeper", show_default=True, help="The server's name in the host's list.")
@pass_ctx
def host_config(ctx: Ctx, policy_file: str | None, name: str) -> None:
    """Print the mcpServers JSON entry (absolute paths) that launches `gatekeeper proxy`.

    Paste it into the host's configuration, e.g. Claude Desktop's claude_desktop_config.json,
    Cursor's .cursor/mcp.json or VS Code's mcp.json (under "servers" there).
    """
    from gatekeeper.policy import load_policy

    policy = load_policy(policy_file, home=ctx.home.path)
    policy.exposed_tools()
    entry = {
        "command": str(Path(sys.executable).absolute()),
        "args": ["-m", "gatekeeper", "proxy", "--policy", str(policy.source)],
        "env": {"GATEKEEPER_HOME": str(ctx.home.path)},
    }
    click.echo(json.dumps({"mcpServers": {name: entry}}, indent=2))

"""``gatekeeper proxy``: what a host launches instead of the raw MCP server."""

from __future__ import annotations

import click

from gatekeeper.cli.context import POLICY, Ctx, pass_ctx


@click.command()
@POLICY
@click.option(
    "--downstream-mode",
    type=click.Choice(["match", "auto", "legacy"]),
    default="match",
    show_default=True,
    help=(
        "How to connect to downstream servers: match (started at once, spoken to in the host's protocol "
        "era once its first request shows it: initialize as legacy, a 2026-07-28 request as auto), auto "
        "(server/discover first; a server that fails it, as 1.x-SDK servers do, is restarted once on "
        "initialize and remembered) or legacy (initialize only)."
    ),
)
@pass_ctx
def proxy(ctx: Ctx, policy_file: str | None, downstream_mode: str) -> None:
    """Serve MCP on stdin/stdout: reads pass through, writes become proposals.

    Starts the downstream servers named in the policy. Diagnostics go to stderr and
    <home>/logs/; stdout carries only the protocol.
    """
    from gatekeeper.policy.launch import launches
    from gatekeeper.proxy.servers import early

    # The children first (issue 12): their own start overlaps ours, the imports below.
    found = launches(policy_file, ctx.home.path) if ctx.home.has_database() else None
    if found is not None:
        early.spawn(found, ctx.home.log_dir, downstream_mode)
    try:
        from gatekeeper.policy import load_policy
        from gatekeeper.proxy.run import serve_stdio
        from gatekeeper.store.version import check_schema

        pol = load_policy(policy_file, home=ctx.home.path)
        pol.exposed_tools()  # name clashes are a start-up error, not a surprise later
        home = ctx.home.require()
        check_schema(home.database)
        serve_stdio(pol, home, mode=downstream_mode)
    finally:
        early.discard()  # a start-up error leaves no server behind; adopted ones ended with the proxy

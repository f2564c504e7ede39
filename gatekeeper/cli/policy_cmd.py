"""``gatekeeper policy``: load policy.yaml, report every problem precisely, print the rules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from gatekeeper.cli.context import POLICY, Ctx, pass_ctx
from gatekeeper.cli.output import WIDE, Col, emit_json, say, table

if TYPE_CHECKING:
    from gatekeeper.policy.model import Policy, Server


@click.group()
def policy() -> None:
    """Check and show the policy (which tools are allowed, proposed or denied)."""


def _mode(row: dict[str, Any]) -> str:
    """The propose mode, with what narrows it: ``append (when operation=append)``."""
    mode = row.get("mode") or ""
    if row.get("when"):
        mode += " (when " + ", ".join(f"{k}={v}" for k, v in row["when"].items()) + ")"
    return mode


def _headers(server: Server) -> dict[str, str]:
    """Each header as where its value comes from (``Bearer $NOTES_TOKEN``): never the value itself."""
    return {name: f"{h.prefix}${h.env}" for name, h in server.headers.items()}


def _where(server: Server) -> str:
    """Where the proxy reaches a server, for a person: the URL and its headers' sources, or the command."""
    if server.url is None:
        return f"command {server.command}"
    extras = [f"{name}: {source}" for name, source in _headers(server).items()]
    extras.append(f"timeout {server.timeout:g}s")
    if server.allow_remote:
        extras.append("allow_remote")
    if server.allow_addresses:
        extras.append("allow_addresses " + " ".join(server.allow_addresses))
    return f"{server.url} ({'; '.join(extras)})"


def _show(pol: Policy, rows: list[dict[str, Any]], wide: bool) -> None:
    """The rules as a table, then where each server is and the review page agents are sent to.

    At 80 columns a rule is its host-facing name, action, mode, and where the path and content
    come from; ``--wide`` adds the server, globs and size limit."""
    from gatekeeper.up.supervise import review_port

    title = f"{pol.source} (digest {pol.digest[:12]})"
    if wide:
        table(
            title,
            ("host name", "server", "tool", "action", "mode", "path", "content", "globs", "max bytes"),
            ((r["host_name"], r["server"], r["tool"], r["action"], _mode(r), *_sources(r), *_limits(r)) for r in rows),
            wide=True,
        )
    else:
        table(
            title,
            (Col("tool", "word"), Col("action", "word"), Col("mode"), Col("path"), Col("content")),
            ((r["host_name"] or r["tool"], r["action"], _mode(r), *_sources(r)) for r in rows),
        )
    shadowed = [name for name, server in pol.servers.items() if server.unlisted == "shadow"]
    if not shadowed:
        say("Tools not named above are denied.")
    else:
        say(f"Tools not named above are shadow writes on {', '.join(shadowed)} (run in a sandbox, proposed)")
        if len(shadowed) < len(pol.servers):
            say("and denied on the other servers.")
    for name, server in pol.servers.items():
        say(f"Server {name}: {_where(server)}")
    port = review_port(pol.review_url)
    listen = (
        f"`gatekeeper up --policy {pol.source}` listens on port {port} for it"
        if port is not None
        else "not a local address: make sure it reaches the page `gatekeeper up` serves"
    )
    say(f"Review page for agents: {pol.review_url} ({listen})")


def _sources(row: dict[str, Any]) -> tuple[str, str]:
    return row.get("path") or "", row.get("content") or row.get("edits") or ""


def _limits(row: dict[str, Any]) -> tuple[str, str]:
    return " ".join(row.get("globs") or []), str(row.get("max_bytes") or "")


def _unset_secrets(pol: Policy) -> list[str]:
    """Header variables not set in this environment: the proxy's calls to that server would fail."""
    return [
        f"{pol.where(('servers', name, 'headers', header))}: ${h.env} is not set here; a proxy started from this "
        "environment cannot reach this server (set it, or add it to the env of the host's entry)"
        for name, server in pol.servers.items()
        for header, h in server.headers.items()
        if h.value() is None
    ]


@policy.command()
@POLICY
@click.option("--json", "as_json", is_flag=True, help="One JSON object per rule.")
@click.option(
    "--accept-changes",
    is_flag=True,
    help="Pin changed downstream tool definitions to what the servers list now (each is an audit event).",
)
@click.option(
    "--no-start",
    is_flag=True,
    help="Do not start (or connect to) the servers: the names rules read are then not checked against their tools.",
)
@WIDE
@pass_ctx
def check(ctx: Ctx, policy_file: str | None, as_json: bool, accept_changes: bool, no_start: bool, wide: bool) -> None:
    """Load the policy, report problems, and print the effective rules.

    Each server's command is looked up as the proxy will start it (on the PATH the child gets);
    one that cannot be found or started is an error (exit 1). A url server is shown with the
    variables its headers are read from (never their values); one that is not set here is a
    warning. Also shows the review URL and the port `gatekeeper up` must listen on for it.

    Each server is then started (a url server connected to) and its tools listed, as the proxy
    would: every argument a propose rule reads (`{arg: body}`, a template's `args.title`, `when`)
    must be one its tool's input schema names, else an error naming the rule, the name and the
    likely one meant (exit 1). A server that cannot be listed, or a rule for a tool its server does
    not list, is a warning.

    A downstream tool whose definition changed since it was first seen is withheld from hosts
    until a person runs this with --accept-changes.
    """
    from gatekeeper.policy import load_policy
    from gatekeeper.policy.commands import command_problems

    pol = load_policy(policy_file, home=ctx.home.path)
    rows = pol.describe()
    problems = pol.check_workspaces()
    errors = command_problems(pol)
    if as_json:
        for row in rows:
            server = pol.servers[row["server"]]
            emit_json({**row, "url": server.url, "headers": _headers(server) or None})
    else:
        _show(pol, rows, wide)
    unlisted, wrong = ([], []) if no_start else _listed_problems(pol)
    for problem in [*problems, *_unset_secrets(pol), *unlisted]:
        click.echo(f"Warning: {problem}", err=True)
    _tool_changes(ctx, accept_changes, as_json)
    for error in wrong:
        click.echo(f"Error: {error}", err=True)
    if wrong:
        click.echo("  → use the argument names the tool takes (the server's listed input schema)", err=True)
    if errors:
        for error in errors:
            click.echo(f"Error: {error}", err=True)
        click.echo(
            "  → a proxy started from this environment could not start them: use an absolute command or set PATH "
            "in the server's env (`gatekeeper host-config` writes the PATH a host needs)",
            err=True,
        )
        raise SystemExit(1)
    if wrong:
        raise SystemExit(1)


def _listed_problems(pol: Policy) -> tuple[list[str], list[str]]:
    """List every server that would start (a command that would not is an error already, a url
    server with a header variable not set a warning): the warnings (servers not listed, rules for
    tools not listed) and the errors (argument names)."""
    from gatekeeper.policy.arguments import argument_problems, unlisted_tools
    from gatekeeper.policy.commands import resolve_server
    from gatekeeper.proxy.probe import list_tools

    names = [
        name
        for name, server in pol.servers.items()
        if (server.is_remote and all(h.value() is not None for h in server.headers.values()))
        or (not server.is_remote and resolve_server(server).ok)
    ]
    found = list_tools(pol, names)
    listed = {name: tools for name, tools in found.items() if isinstance(tools, dict)}
    warnings = [
        f"{pol.where(('servers', name))}: could not list the tools of server {name!r}, so the arguments its "
        f"rules read were not checked: {why}"
        for name, why in found.items()
        if isinstance(why, str)
    ]
    return [*warnings, *unlisted_tools(pol, listed)], argument_problems(pol, listed)


def _tool_changes(ctx: Ctx, accept: bool, as_json: bool) -> None:
    if not ctx.home.has_database():
        if accept:
            ctx.home.require()
        return
    with ctx.home.require().store() as store:
        changes = store.accept_tool_changes(ctx.actor) if accept else store.pending_tool_changes()
    for change in changes:
        verb = "accepted" if accept else "withheld, changed since pinned"
        if as_json:
            emit_json({"tool_change": verb, **{k: change[k] for k in ("server", "tool", "pinned", "digest")}})
        else:
            click.echo(
                f"{'Accepted' if accept else 'Withheld'}: {change['server']}.{change['tool']} "
                f"definition {change['pinned'][:12]} -> {change['digest'][:12]}",
                err=not accept,
            )
    if changes and not accept and not as_json:
        click.echo("  → review the new definitions, then run `gatekeeper policy check --accept-changes`", err=True)

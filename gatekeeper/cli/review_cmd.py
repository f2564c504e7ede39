"""``gatekeeper review`` (serve the review page, print log-in links) and ``gatekeeper reviewer``."""

from __future__ import annotations

import ipaddress
import json
import sys
from typing import TYPE_CHECKING

import click

from gatekeeper.cli.context import POLICY, Ctx, pass_ctx
from gatekeeper.cli.output import emit_json, table
from gatekeeper.cli.passkey_cmd import enrol, passkey_remove, passkeys, print_enrolment_link, review_origin
from gatekeeper.errors import InvalidInput, PolicyError
from gatekeeper.names import REVIEWER

if TYPE_CHECKING:
    from gatekeeper.policy import Policy

DEFAULT_PORT = 8765


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.group(invoke_without_command=True)
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind. Loopback unless --allow-remote.")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a non-loopback --host (needs --tls-cert/--tls-key or --trusted-proxy).",
)
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), help="TLS certificate (PEM, with its chain).")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), help="TLS private key (PEM, mode 0600).")
@click.option(
    "--trusted-proxy",
    "trusted_proxies",
    multiple=True,
    metavar="ADDR",
    help="A reverse proxy (IP or CIDR, repeatable) whose X-Forwarded-Proto/-Host/-For are believed.",
)
@POLICY
@click.pass_context
def review(
    click_ctx: click.Context,
    port: int,
    host: str,
    allow_remote: bool,
    tls_cert: str | None,
    tls_key: str | None,
    trusted_proxies: tuple[str, ...],
    policy_file: str | None,
) -> None:
    """Serve the review page, where reviewers approve or reject proposals.

    Binds 127.0.0.1 by default and answers at http://localhost:PORT (passkeys need that name) and
    at 127.0.0.1 (password sessions); only to its own Host and Origin. The policy's approve_with
    says whether a password may approve; its reviewers and approvals, who may decide what and how
    many distinct reviewers must approve. For a team: a public review_url in the policy (with its
    review: hosts/origins), and TLS here (--tls-cert/--tls-key) or in a --trusted-proxy in front.
    """
    if click_ctx.invoked_subcommand is not None:
        return
    ctx: Ctx = click_ctx.find_object(Ctx)  # type: ignore[assignment]
    check_exposure(host, port, allow_remote, tls_cert, tls_key, trusted_proxies)
    from gatekeeper.review.app import Config, create_app
    from gatekeeper.review.serve import serve
    from gatekeeper.store.version import check_schema
    from gatekeeper.up import ready

    home = ctx.home.require()
    check_schema(home.database)
    scheme = "https" if tls_cert else "http"
    extra = () if _is_loopback(host) else (host,)
    policy = review_policy(ctx, policy_file)
    approve_with = "any" if policy is None else policy.approve_with
    config = Config(home, port, scheme, extra, approve_with, policy, trusted_proxies)
    app = create_app(config)
    shown = config.public_origin or f"{scheme}://localhost:{port}"
    click.echo(f"Review page: {shown}/  (Ctrl-C stops; approve_with: {approve_with})", err=True)
    serve(
        app,
        ready.notify,  # `gatekeeper up` waits for this before it prints a link
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        server_header=False,
        proxy_headers=False,  # X-Forwarded-*: only from --trusted-proxy, in review/forwarded.py
    )


def check_exposure(
    host: str, port: int, allow_remote: bool, cert: str | None, key: str | None, proxies: tuple[str, ...]
) -> None:
    """Refuse, before serving, what would put passwords and passkey log-ins on a network in clear,
    and TLS files that would not work (a clear error now, not a traceback from uvicorn)."""
    from gatekeeper.review.forwarded import networks
    from gatekeeper.review.tls import check_tls

    if bool(cert) != bool(key):
        raise click.UsageError("--tls-cert and --tls-key go together: give both (the certificate and its key)")
    networks(proxies)
    if cert and key:
        check_tls(cert, key)
    if _is_loopback(host):
        return
    if not allow_remote:
        raise click.UsageError(
            f"refusing to bind {host}: the review page is for this machine only. Use --allow-remote "
            "with --tls-cert and --tls-key (or --trusted-proxy ADDR behind a TLS proxy) if you really mean it."
        )
    if not (cert or proxies):
        raise click.UsageError(
            f"refusing to bind {host} without TLS: passwords, passkey log-ins and session cookies would "
            "cross the network in clear. Give --tls-cert and --tls-key, or put a TLS reverse proxy in front "
            "and name it with --trusted-proxy ADDR."
        )
    how = "TLS" if cert else f"behind the proxy {', '.join(proxies)}"
    click.echo(f"WARNING: serving the review page on {host}:{port} to the network ({how}).", err=True)


def review_policy(ctx: Ctx, policy_file: str | None) -> Policy | None:
    """The policy (approve_with, reviewers' scopes, rules' approvals). A policy named but broken stops
    the page; none found means 'any', no scopes, one approval (the committer, which always reads the
    policy, still refuses what the policy refuses)."""
    from gatekeeper.policy import load_policy

    try:
        return load_policy(policy_file, home=ctx.home.path)
    except PolicyError as exc:
        if policy_file is not None:
            raise
        click.echo(f"note: no policy read ({exc}); approvals may use a passkey or the password", err=True)
        return None


@review.command("login-link")
@click.argument("name")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help="The page's port on this machine. Default: the policy's review_url's (ignored for a public review_url).",
)
@POLICY
@pass_ctx
def login_link(ctx: Ctx, name: str, port: int | None, policy_file: str | None) -> None:
    """Print a one-time log-in link for NAME (valid 10 minutes, works once).

    The link is at the review page's address: the policy's public review_url for a team, else
    localhost."""
    from gatekeeper.review.auth import Tokens
    from gatekeeper.store.events import LOGIN_LINK_ISSUED
    from gatekeeper.store.reviews import Reviews

    home = ctx.home.require()
    with home.store() as store:
        reviews = Reviews(store)
        try:
            if reviews.password_hash(name) is None:
                raise InvalidInput(f"no enabled reviewer {name!r}", "`gatekeeper reviewer list` shows them")
        finally:
            reviews.close()
        store.append_event(LOGIN_LINK_ISSUED, ctx.actor, {"reviewer": name})
    token = Tokens(home.read_key()).login_link(name)
    click.echo(f"{link_origin(ctx, policy_file, port)}/login/link?token={token}")


def link_origin(ctx: Ctx, policy_file: str | None, port: int | None) -> str:
    """Where a person opens a printed link: the policy's review_url at a public name (a team's page,
    perhaps behind a TLS proxy: this machine's port means nothing there), else localhost at
    ``port`` (default: the review_url's), the name passkeys are made for on one machine."""
    from urllib.parse import urlsplit

    from gatekeeper.origins import public_origin

    origin = review_origin(ctx, policy_file)
    if port is None or public_origin(origin) is not None:
        return origin
    return f"{urlsplit(origin).scheme}://localhost:{port}"


@click.group()
def reviewer() -> None:
    """Manage the people who may approve: add, list, disable, passwd, and their passkeys."""


def read_password(password_stdin: bool) -> str:
    """A new reviewer password, from stdin's first line or asked twice; at least 12 characters."""
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    if len(password) < 12:
        raise InvalidInput("the password is shorter than 12 characters", "choose a longer one (a passphrase is fine)")
    return password


def check_reviewer_name(name: str) -> str:
    """``name`` if it is a valid reviewer name, else a clear error saying what a name may hold."""
    if not REVIEWER.allows(name):
        raise InvalidInput(f"reviewer name {name!r} is not allowed", f"a reviewer name {REVIEWER.rule}")
    return name


@reviewer.command("add")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of stdin.")
@POLICY
@pass_ctx
def reviewer_add(ctx: Ctx, name: str, password_stdin: bool, policy_file: str | None) -> None:
    """Add a reviewer (argon2id password hash; the password is never stored or logged) and print a
    one-time link where they enrol a passkey."""
    from gatekeeper.review.auth import hash_password

    check_reviewer_name(name)
    home = ctx.home.require()
    hashed = hash_password(read_password(password_stdin))
    with home.store() as store:
        store.add_reviewer(name, hashed, actor=ctx.actor)
    click.echo(f"Added reviewer {name}.")
    print_enrolment_link(ctx, name, policy_file)


@reviewer.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@pass_ctx
def reviewer_list(ctx: Ctx, as_json: bool) -> None:
    """List reviewers and whether each is enabled."""
    with ctx.home.require().reader() as reader:
        rows = reader.reviewers()
    if as_json:
        for row in rows:
            emit_json({**row, "enabled": row["disabled_at"] is None})
        return
    table(
        None,
        ("name", "created", "state"),
        ((r["name"], r["created_at"], "disabled " + r["disabled_at"] if r["disabled_at"] else "enabled") for r in rows),
    )


@reviewer.command("disable")
@click.argument("name")
@pass_ctx
def reviewer_disable(ctx: Ctx, name: str) -> None:
    """Disable a reviewer for good: their sessions stop working at once."""

    with ctx.home.require().store() as store:
        store.disable_reviewer(name, actor=ctx.actor)
    click.echo(f"Disabled reviewer {name}.")


@reviewer.command("passwd")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the new password from the first line of stdin.")
@pass_ctx
def reviewer_passwd(ctx: Ctx, name: str, password_stdin: bool) -> None:
    """Set a reviewer's password; every session opened with the old one ends at once."""
    from gatekeeper.review.auth import hash_password

    home = ctx.home.require()
    hashed = hash_password(read_password(password_stdin))
    with home.store() as store:
        event = store.set_reviewer_password(name, hashed, actor=ctx.actor)
    ended = json.loads(event.payload)["sessions_ended"]
    click.echo(f"Changed the password of {name}; ended {ended} open session{'' if ended == 1 else 's'}.")


for _command in (enrol, passkeys, passkey_remove):
    reviewer.add_command(_command)

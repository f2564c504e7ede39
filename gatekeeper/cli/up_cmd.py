"""``gatekeeper up``: review page + committer, supervised, with a log-in link to start with."""

from __future__ import annotations

import sys
from functools import partial
from typing import TYPE_CHECKING

import click

from gatekeeper.cli.context import POLICY, Ctx, pass_ctx
from gatekeeper.cli.passkey_cmd import print_enrolment_link
from gatekeeper.cli.review_cmd import DEFAULT_PORT, check_exposure, check_reviewer_name, read_password
from gatekeeper.errors import PolicyError
from gatekeeper.store.target import PostgresUrl

if TYPE_CHECKING:
    from gatekeeper.home import Home
    from gatekeeper.policy import Policy
    from gatekeeper.up.supervise import Child

APPROVALS = {"any": "a passkey, or the password typed again", "passkey": "a passkey"}


@click.command()
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help=f"Port of the review page. Default: the port of the policy's review_url, else {DEFAULT_PORT}.",
)
@POLICY
@click.option("--reviewer", "reviewer_name", help="On first run: the first reviewer's name (else asked).")
@click.option("--password-stdin", is_flag=True, help="On first run: read the first reviewer's password from stdin.")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), help="Serve the page over TLS: certificate.")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), help="Serve the page over TLS: key (0600).")
@click.option("--trusted-proxy", "trusted_proxies", multiple=True, metavar="ADDR", help="As for `gatekeeper review`.")
@pass_ctx
def up(
    ctx: Ctx,
    port: int | None,
    policy_file: str | None,
    reviewer_name: str | None,
    password_stdin: bool,
    tls_cert: str | None,
    tls_key: str | None,
    trusted_proxies: tuple[str, ...],
) -> None:
    """Start the review page and the committer (two child processes) and watch them.

    When the review page answers (not before), prints its URL (at localhost: passkeys need that
    name) and a one-time log-in link (and a passkey enrolment link for a reviewer it creates); then
    a line for every proposal, decision and commit, and restarts a child that dies after it ran.
    Ctrl-C stops both. Warns when the policy's review_url names another port, since agents would be
    handed links to a page that is not there. Exits 1 with the reason when it cannot start: a bad
    policy, its port taken, another `up` or committer on this home, or a child that ends before it
    runs.
    """
    from gatekeeper.review.auth import Tokens
    from gatekeeper.store.events import LOGIN_LINK_ISSUED
    from gatekeeper.up.checks import UpLock, check_no_committer, check_port, page_answers
    from gatekeeper.up.supervise import supervise

    home = ctx.home
    policy = _policy(policy_file, home)
    lock = UpLock(home)  # held until this process ends
    if home.path.is_dir():  # else nothing can be running on it yet
        lock.acquire()
    port = _port(policy, port)
    check_exposure("127.0.0.1", port, False, tls_cert, tls_key, trusted_proxies)  # before a child fails on it
    if home.path.is_dir():
        check_no_committer(home, port)
    check_port(port)
    who, created = _first_run(ctx, reviewer_name, password_stdin)
    lock.acquire()
    served = ["--tls-cert", tls_cert, "--tls-key", tls_key] if tls_cert and tls_key else []
    children = _children(home, str(policy.source), port, [*served, *as_args("--trusted-proxy", trusted_proxies)])
    children[0].answers = partial(page_answers, port, tls=bool(tls_cert))  # no link before the page answers
    children[0].fix = f"if another program took port {port}, start on another: `gatekeeper up --port N`"
    origin = page_origin(policy.review_url, port, tls=bool(tls_cert))

    def say(line: str) -> None:
        click.echo(line)
        sys.stdout.flush()

    def ready() -> None:
        with home.store() as store:
            store.append_event(LOGIN_LINK_ISSUED, ctx.actor, {"reviewer": who, "by": "up"})
        link = f"{origin}/login/link?token={Tokens(home.read_key()).login_link(who)}"
        say(f"Review page: {origin}/")
        say(f"Approvals need {APPROVALS[policy.approve_with]} (the policy's approve_with: {policy.approve_with})")
        say(f"Log in as {who} (one-time link, 10 minutes): {link}")
        if created:
            print_enrolment_link(ctx, who, str(policy.source), origin=origin)
        say(f"Committing into the workspaces of {policy.source}. Ctrl-C stops.")

    raise SystemExit(supervise(home, children, say=say, ready=ready))


def _policy(policy_file: str | None, home: Home) -> Policy:
    """The policy, or ``up`` stops here with the policy's own error (exit 1, as for any start failure)."""
    from gatekeeper.policy import load_policy
    from gatekeeper.up.checks import StartFailed

    try:
        return load_policy(policy_file, home=home.path)
    except PolicyError as exc:
        raise StartFailed(str(exc)) from None


def _port(policy: Policy, port: int | None) -> int:
    """The page's port (default: the review_url's), after warning about what would go wrong."""
    from gatekeeper.up.supervise import port_mismatch, review_port

    for problem in policy.check_workspaces():
        click.echo(f"Warning: {problem}", err=True)
    if port is None:
        port = review_port(policy.review_url) or DEFAULT_PORT
    if mismatch := port_mismatch(policy.review_url, port, str(policy.source)):
        click.echo(f"Warning: {mismatch}", err=True)
    return port


def _children(home: Home, policy: str, port: int, served: list[str]) -> list[Child]:
    """The review page (with its TLS/proxy options) and the committer, as ``supervise`` runs them."""
    from gatekeeper.up.supervise import Child, child_argv

    review = child_argv(home, "review", "--port", str(port), "--policy", policy, *served)
    commit = child_argv(home, "commit", "--watch", "--policy", policy)
    logs = home.log_dir
    return [Child("review page", review, logs / "review.log"), Child("committer", commit, logs / "commit.log")]


def as_args(option: str, values: tuple[str, ...]) -> list[str]:
    """``--option v1 --option v2``: a repeatable option passed on to a child."""
    return [arg for value in values for arg in (option, value)]


def page_origin(review_url: str, port: int, *, tls: bool) -> str:
    """Where people open the page (log-in and enrolment links): the policy's public review_url,
    else this port at localhost (the passkeys' name on this machine)."""
    from gatekeeper.origins import public_origin
    from gatekeeper.trust.approval import RelyingParty

    local = f"{'https' if tls else 'http'}://localhost:{port}"
    return RelyingParty.for_review_url(public_origin(review_url) or local).origins[0]


def _first_run(ctx: Ctx, reviewer_name: str | None, password_stdin: bool) -> tuple[str, bool]:
    """Initialise the home and add the first reviewer if needed; return who gets the log-in link,
    and whether they were just created (then they get a passkey enrolment link too)."""
    from gatekeeper.home import setup_home
    from gatekeeper.review.auth import hash_password

    home = ctx.home
    if _needs_setup(home):
        setup_home(home, ctx.actor, by="up")
        click.echo(f"Initialised a Gatekeeper home at {home.path} (database {home.database})")
    for name in home.tighten_db_files():
        click.echo(f"Made {home.path / name} private (mode 0600); it was readable by others")
    with home.require().reader() as reader:
        reviewers: list[str] = [r["name"] for r in reader.reviewers() if r["disabled_at"] is None]
    if not reviewers:
        name = check_reviewer_name(reviewer_name or click.prompt("First reviewer's name", default="me"))
        hashed = hash_password(read_password(password_stdin))
        with home.store() as store:
            store.add_reviewer(name, hashed, actor=ctx.actor)
        click.echo(f"Added reviewer {name}.")
        return name, True
    return (reviewer_name if reviewer_name is not None and reviewer_name in reviewers else reviewers[0]), False


def _needs_setup(home: Home) -> bool:
    """A first run: no home, no SQLite file, or a PostgreSQL database without Gatekeeper's schema
    (a team's administrator made it empty). A schema that is merely old is `gatekeeper db upgrade`'s
    business, not something ``up`` does behind a team's back."""
    if not home.path.is_dir() or not home.has_database():
        return True
    if isinstance(home.database, PostgresUrl):
        from gatekeeper.store.version import current_revision

        return current_revision(home.database) is None
    return False

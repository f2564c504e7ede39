"""``gatekeeper commit``: the only code that writes into a workspace (new files exclusively; changes
to existing files only over their approved base)."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from typing import Any

import click

from gatekeeper.cli.context import POLICY, Ctx, pass_ctx
from gatekeeper.cli.output import emit_json
from gatekeeper.errors import GatekeeperError

OUTCOME_ORDER = ("created", "applied", "deleted", "conflict", "refused", "failed")
WRITTEN = {"created": "→", "applied": "changed:", "deleted": "removed:"}


def _line(r: Any) -> str:
    """One line a person can act on: outcome, id, path, then where it went or why not."""
    where = f"{WRITTEN[r.outcome]} {r.final_path}" if r.outcome in WRITTEN else r.detail
    if r.outcome == "created" and r.detail:
        where += " (reconciled: an identical file was already there)"
    elif r.outcome in WRITTEN and r.detail:
        where += f" ({r.detail})"
    if not r.recorded:
        where = f"another committer recorded this proposal's outcome first ({where})"
    return f"{r.outcome:<9} {r.proposal_id}  {r.path}  {where}"


def _switches() -> Any:
    """The crash-test switches from the environment; a run with any set says so on stderr."""
    from gatekeeper.commit import faults

    switches = faults.from_env()
    if switches.active:
        click.echo(f"warning: test-only switches are set ({', '.join(switches.active)}); unset them", err=True)
    return switches


@click.command()
@click.option("--once", is_flag=True, help="Commit every waiting approval, then exit (the default).")
@click.option("--watch", is_flag=True, help="Stay up and commit each approval as it arrives (Ctrl-C stops).")
@POLICY
@click.option(
    "--batch",
    type=click.IntRange(1, 1000),
    default=64,
    show_default=True,
    help="Proposals per database transaction (intents, then outcomes).",
)
@click.option(
    "--server",
    "servers",
    multiple=True,
    metavar="NAME",
    help="Commit only this server's approvals (repeatable; default: every server). One committer per "
    "machine for the servers whose workspaces it holds.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per outcome (then a summary with --once).")
@pass_ctx
def commit(
    ctx: Ctx, once: bool, watch: bool, policy_file: str | None, batch: int, servers: tuple[str, ...], as_json: bool
) -> None:
    """Write the approved proposals into their workspaces, exactly once.

    Each approval is checked again first (its signature with secret.key, its sha256 against the
    stored bytes, the current policy's rule and workspace); a failed check is recorded as
    refused and nothing is written. A new file is created only where nothing exists yet; a change
    (replace, append, edit) is swapped in, and a delete done, only while the file still holds the
    approved base bytes (else: conflict, nothing written). Never through a symbolic link, never a
    partly written file. Every outcome (created, applied, deleted, conflict, refused, failed) is
    recorded with an audit event; the agent sees it through gatekeeper_proposal_status.
    Each approval applied is kept in the committer's own journal (commit-journal in the home):
    one the database has lost is refused and waits, never applied twice.

    One committer per server runs at a time (locks in the home); with a PostgreSQL store,
    committers on several machines each claim an approval before acting on it, so none is done
    twice. Exit status: 0 when every waiting approval got its outcome (conflicts and refusals
    included) or another committer is on it, 1 when a commit failed or some had to wait, 2 for a
    bad policy or usage, 3 when another committer holds the lock.
    """
    if once and watch:
        raise click.UsageError("pass --once or --watch, not both")
    from gatekeeper.commit import run
    from gatekeeper.commit.watch import stop_on_signals
    from gatekeeper.commit.watch import watch as watch_loop
    from gatekeeper.store.backends import Outage
    from gatekeeper.store.tx import RETRY_SECONDS
    from gatekeeper.up import ready

    switches = _switches()

    def show(r: Any) -> None:
        emit_json(r.as_dict()) if as_json else click.echo(_line(r))

    def say(message: str) -> None:
        click.echo(f"commit: {message}", err=True)

    stop = threading.Event()
    database = ctx.home.database
    errors: tuple[type[BaseException], ...] = (*run.database_errors(database), OSError)
    try:
        with run.session(
            ctx.home, policy_file, batch=batch, switches=switches, on_result=show, should_stop=stop.is_set,
            servers=servers,
        ) as (committer, reader):  # fmt: skip
            committer.store.outage = Outage(say, f"retrying for up to {RETRY_SECONDS:g} s")
            if watch:
                stop_on_signals(stop)
                which = f" of {', '.join(sorted(committer.servers))}" if committer.servers else ""
                click.echo(f"Watching {database} for approvals{which} (Ctrl-C stops)", err=True)
                ready.notify()  # holding the lock, watching: `gatekeeper up` counts it as running
                watch_loop(committer, reader, stop, say)
                click.echo("Stopped.", err=True)
                return
            report = committer.run_pass()
    except errors as exc:  # not a domain error: one line, never a traceback
        raise GatekeeperError(f"the committer stopped: {exc}", "fix the cause and run it again") from None
    _summary(report, as_json)


def _summary(report: Any, as_json: bool) -> None:
    """After ``--once``: why some wait, the counts, and the exit status (1: failed or left waiting)."""
    for message in report.waiting:
        click.echo(f"waiting: {message}", err=True)
    counts = Counter(r.outcome for r in report.results if r.recorded)
    others = len(report.elsewhere - report.finished)  # claimed by another committer (PostgreSQL)
    if as_json:
        emit_json({"summary": {k: counts.get(k, 0) for k in OUTCOME_ORDER} | {"waiting": report.unfinished}})
    elif not report.results and not report.unfinished and not others:
        click.echo("Nothing to commit: no approved proposal is waiting.")
    else:
        parts = ", ".join(f"{counts.get(k, 0)} {k}" for k in OUTCOME_ORDER)
        waiting = f"; {report.unfinished} still waiting" if report.unfinished else ""
        waiting += f"; {others} being committed by another committer" if others else ""
        click.echo(f"Done: {parts}{waiting}.")
    if report.stopped:
        click.echo(f"Error: stopped early: {report.stopped}", err=True)
    if report.stopped or report.unfinished or counts.get("failed"):
        sys.exit(1)

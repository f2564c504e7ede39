"""``gatekeeper audit``: query and verify the audit log. Opens the database read-only."""

from __future__ import annotations

import base64
import csv
import json
import sys
from typing import Any

import click

from gatekeeper.audit import checkpoints as marked
from gatekeeper.audit.verify import SavedHead, parse_head
from gatekeeper.canonical import parse_since
from gatekeeper.cli import audit_view as view
from gatekeeper.cli.context import POLICY, Ctx, pass_ctx
from gatekeeper.cli.output import WIDE, emit_json
from gatekeeper.cli.verify_report import Checked, VerifyResult, emit
from gatekeeper.errors import InvalidInput, NotFound
from gatekeeper.store.events import KINDS
from gatekeeper.store.follow import Follower
from gatekeeper.store.lookup import resolve, unknown_kind
from gatekeeper.store.queries import STATUSES, Reader, event_dict
from gatekeeper.store.version import check_schema


class Since(click.ParamType[str, Any]):
    """``30m``, ``1h``, ``7d`` ago, or an ISO-8601 time; becomes a canonical UTC timestamp."""

    name = "since"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return parse_since(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Head(click.ParamType[SavedHead, Any]):
    """A head kept elsewhere, as ``audit head`` printed it; a bad one is a usage error (exit 2)."""

    name = "head"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> SavedHead:
        if isinstance(value, SavedHead):
            return value
        try:
            return parse_head(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


SINCE = click.option("--since", type=Since(), help="Only since then: a duration ago (30m, 1h, 7d) or ISO-8601.")
JSON = click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")


def _reader(ctx: Ctx) -> Reader:
    home = ctx.home.require()
    check_schema(home.database)
    return home.reader()


def _event_json(row: Any) -> dict[str, Any]:
    out = event_dict(row)
    out["payload"] = json.loads(out["payload"])
    return out


@click.group()
def audit() -> None:
    """Query and verify the tamper-evident audit log (read-only)."""


@audit.command()
@click.option("--status", type=click.Choice(STATUSES), help="Only proposals with this derived status.")
@click.option("--server", help="Only proposals for this downstream server.")
@SINCE
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="At most this many rows.")
@WIDE
@JSON
@pass_ctx
def proposals(
    ctx: Ctx, status: str | None, server: str | None, since: str | None, limit: int, wide: bool, as_json: bool
) -> None:
    """List proposals, newest first, with their derived status.

    Ids are shown by their shortest unique prefix (8 characters or more): any unique prefix names
    a proposal to `audit show`, `audit log --proposal` and `revert`."""
    with _reader(ctx) as reader:
        rows = reader.proposals(status=status, server=server, since=since, limit=limit)
        if as_json:
            for row in rows:
                emit_json(row.as_dict())
            return
        view.proposals(reader, f"{len(rows)} proposal(s)" + (f" ({status})" if status else ""), rows, wide)


@audit.command()
@click.argument("proposal_id")
@click.option(
    "--content", is_flag=True, help="Print the exact proposed bytes, the file after it (with --json: as base64)."
)
@click.option(
    "--base",
    "base",
    is_flag=True,
    help="Print the exact bytes a change replaced or deleted, the file before it (with --json: as base64).",
)
@WIDE
@JSON
@pass_ctx
def show(ctx: Ctx, proposal_id: str, content: bool, base: bool, wide: bool, as_json: bool) -> None:
    """One proposal: mode, arguments, destination, base and result size and sha256, decision,
    commit outcome and events. PROPOSAL_ID may be any unique prefix of the id."""
    if content and base:
        raise click.UsageError("pass --content or --base, not both")
    with _reader(ctx) as reader:
        proposal_id = resolve(reader, proposal_id)
        detail = reader.proposal(proposal_id)
        if detail is None:
            raise NotFound(f"no proposal {proposal_id}", "`gatekeeper audit proposals` lists them")
        raw: bytes = detail.pop("content")
        base_raw: bytes | None = detail.pop("base")
        if base and base_raw is None:
            raise InvalidInput(
                f"proposal {proposal_id} is a create: it replaced nothing, so it has no base bytes",
                "`--content` prints the bytes it proposed",
            )
        detail["arguments"] = json.loads(detail["arguments"])
        for event in detail["events"]:
            event["payload"] = json.loads(event["payload"])
        if as_json:
            if content:
                detail["content_base64"] = base64.b64encode(raw).decode("ascii")
            if base and base_raw is not None:
                detail["base_base64"] = base64.b64encode(base_raw).decode("ascii")
            emit_json(detail)
        elif content or base:
            sys.stdout.buffer.write(raw if content else bytes(base_raw or b""))
            sys.stdout.flush()
        else:
            view.show(reader, detail, wide)


def _check_kind(reader: Reader, kind: str | None) -> None:
    """An unknown ``--kind`` is a usage error naming the kinds, not an empty table."""
    if kind is not None and unknown_kind(reader, kind):
        from gatekeeper.policy.messages import suggest

        raise click.BadParameter(
            f"no event kind {kind!r}{suggest(kind, sorted(KINDS))}; the kinds are: {', '.join(sorted(KINDS))}",
            param_hint="'--kind'",
        )


@audit.command()
@click.option("--kind", help="Only events of this kind (init, proposal_created, decision, commit_outcome, ...).")
@click.option("--proposal", "proposal_id", help="Only events about this proposal (any unique prefix of its id).")
@SINCE
@click.option("-n", "--last", type=click.IntRange(min=1), metavar="N", help="Only the newest N events (in order).")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events as they are appended (Ctrl-C stops).")
@WIDE
@JSON
@pass_ctx
def log(
    ctx: Ctx,
    kind: str | None,
    proposal_id: str | None,
    since: str | None,
    last: int | None,
    follow: bool,
    wide: bool,
    as_json: bool,
) -> None:
    """Print audit events in order."""
    with _reader(ctx) as reader:
        _check_kind(reader, kind)
        if proposal_id is not None:
            proposal_id = resolve(reader, proposal_id)
        rows = reader.events(kind=kind, proposal_id=proposal_id, since=since, last=last)
        if as_json:
            for row in rows:
                emit_json(_event_json(row))
        else:
            view.events(reader, None, rows, wide)
        if follow:
            _follow(reader, rows, kind, proposal_id, since, as_json)


def _follow(
    reader: Reader, rows: list[Any], kind: str | None, proposal_id: str | None, since: str | None, as_json: bool
) -> None:
    last = rows[-1][0] if rows else reader.head()[0] if since is None else 0
    follower = Follower(reader, last, kind=kind, proposal_id=proposal_id, since=since)
    try:
        for batch in follower.follow():
            for row in batch:
                if as_json:
                    emit_json(_event_json(row))
                else:
                    click.echo("\t".join(str(v) for v in (row[0], row[1], row[2], row[3], row[4] or "", row[5])))
            sys.stdout.flush()
    except KeyboardInterrupt:
        return
    finally:
        follower.close()


@audit.command()
@click.option(
    "--expect-head",
    type=Head(),
    metavar="'SEQ HASH'",
    help="Also fail unless the log still holds this head (the line `audit head` printed) at its seq.",
)
@click.option("--files", is_flag=True, help="Also compare committed files on disk with their approved sha256.")
@click.option(
    "--approvals",
    is_flag=True,
    help="Also re-verify every approval (decisions and a rule's approval rows): signature, digests and passkey "
    "assertion (origins from the policy).",
)
@click.option(
    "--max-unsigned",
    envvar="GATEKEEPER_MAX_UNSIGNED",
    metavar="AGE",
    help="Also fail when an event older than AGE (15m, 1h, 1d) is covered by no signed checkpoint.",
)
@POLICY
@JSON
@pass_ctx
def verify(
    ctx: Ctx,
    expect_head: SavedHead | None,
    files: bool,
    approvals: bool,
    max_unsigned: str | None,
    policy_file: str | None,
    as_json: bool,
) -> None:
    """Recompute the hash chain and check the signed checkpoints. Exit 0 when intact; exit 1 naming
    the first bad seq.

    Every reviewer and passkey row is checked against its signature too (a password hash or a
    passkey's public key changed in the database), each bad row named with what to do. So is every
    commit outcome: a commit_record row without its commit_outcome event, or the reverse, is named.

    The newest checkpoint verified here is remembered (`checkpoint-seen` in the home): if it is gone
    from the log next time, that fails too."""
    from gatekeeper.audit.rows import verify_rows
    from gatekeeper.audit.verify import verify_chain, verify_files, verify_outcomes

    seen = ctx.home.path / marked.SEEN_NAME
    keyring = ctx.home.keys.keyring()
    with _reader(ctx) as reader:
        report = verify_chain(reader, expect_head)
        marks = marked.verify_checkpoints(reader, keyring)
        marked.check_seen(reader, marks, seen)
        if max_unsigned is not None:
            marked.check_unsigned(reader, marks, Since().convert(max_unsigned, None, None), max_unsigned)
        result = VerifyResult(
            report,
            marks,
            None if expect_head is None else str(expect_head),
            Checked(*verify_files(reader)) if files else None,
            Checked(*_verify_approvals(ctx, reader, policy_file)) if approvals else None,
            Checked(*verify_rows(reader, keyring)),
            Checked(*verify_outcomes(reader)),
        )
        kept = marked.remember(reader, marks, seen) if result.ok else None
    if kept is not None:
        click.echo(f"WARNING: {kept}", err=True)
    emit(result, as_json)
    if not result.ok:
        raise SystemExit(1)


def _verify_approvals(ctx: Ctx, reader: Reader, policy_file: str | None) -> tuple[int, list[Any]]:
    from gatekeeper.audit.approvals import verify_approvals
    from gatekeeper.commit.trust import Trust
    from gatekeeper.policy import load_policy

    return verify_approvals(reader, load_policy(policy_file, home=ctx.home.path), Trust.of(ctx.home))


@audit.command()
@pass_ctx
def checkpoint(ctx: Ctx) -> None:
    """Sign the chain head now with the review side's key (the review page does so every 5 minutes)."""
    from gatekeeper.store.checkpoints import append_checkpoint

    with ctx.home.require().store() as store:
        event = append_checkpoint(store, "cli")
    if event is None:
        click.echo("The head is already a signed checkpoint: nothing new to sign.")
    else:
        click.echo(f"Signed checkpoint at seq {event.seq}: {event.payload}")


@audit.command()
@JSON
@pass_ctx
def head(ctx: Ctx, as_json: bool) -> None:
    """Print the last seq and its hash: keep it elsewhere, check later with `verify --expect-head`."""
    with _reader(ctx) as reader:
        seq, digest = reader.head()
    if as_json:
        emit_json({"seq": seq, "hash": digest})
    else:
        click.echo(f"{seq} {digest}")


@audit.command()
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True)
@SINCE
@pass_ctx
def export(ctx: Ctx, fmt: str, since: str | None) -> None:
    """Stream every audit event (payload as canonical JSON) to stdout."""
    from gatekeeper.store.chain import batched

    columns = ("seq", "at", "kind", "actor", "proposal_id", "payload", "prev_hash", "hash")
    with _reader(ctx) as reader:
        cursor = reader.all_events(since)
        out = sys.stdout
        if fmt == "csv":
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(columns)
            for row in batched(cursor):
                writer.writerow(row)
        else:
            for row in batched(cursor):
                out.write(json.dumps(_event_json(row), ensure_ascii=False, sort_keys=True) + "\n")
        out.flush()

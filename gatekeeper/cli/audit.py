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
from gatekeeper.cli.context import POLICY, Ctx, pass_ctx
from gatekeeper.cli.output import emit_json, kv, table
from gatekeeper.cli.verify_report import Checked, VerifyResult, emit
from gatekeeper.errors import InvalidInput, NotFound
from gatekeeper.store.follow import Follower
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


def _resolves_to(detail: dict[str, Any]) -> str:
    real = detail.get("workspace_real")
    if real is None:
        return " (real path not recorded: made before Gatekeeper recorded it)"
    return f" (resolves to {real})" if real != detail["workspace"] else ""


def _show_rows(detail: dict[str, Any]) -> list[tuple[str, Any]]:
    """The labelled lines of ``audit show`` for one proposal."""
    decision, commit = detail["decision"], detail["commit"]
    return [
        ("status", detail["status"]),
        ("server / tool", f"{detail['server']} / {detail['tool']}"),
        ("mode", detail["mode"]),
        ("destination", detail["path"]),
        ("workspace", detail["workspace"] + _resolves_to(detail)),
        *_change_rows(detail),
        ("created", detail["created_at"]),
        ("expires", detail["expires_at"]),
        (
            "requester",
            f"{detail['client_name'] or '?'} {detail['client_version'] or ''} "
            f"(protocol {detail['protocol_version'] or '?'}, session {detail['session_id'] or '?'})",
        ),
        ("policy", detail["policy_digest"]),
        ("arguments", json.dumps(detail["arguments"], ensure_ascii=False)),
        (
            "decision",
            f"{decision['verdict']} by {decision['reviewer']} at {decision['decided_at']}"
            + (f": {decision['reason']}" if decision["reason"] else "")
            if decision
            else "none",
        ),
        (
            "commit",
            f"{commit['outcome']} at {commit['at']}"
            + (f" → {commit['final_path']}" if commit["final_path"] else "")
            + (f" ({commit['detail']})" if commit["detail"] else "")
            if commit
            else "none",
        ),
    ]


def _change_rows(detail: dict[str, Any]) -> list[tuple[str, Any]]:
    """Size and digest of the result; for a change, of its base too (a delete's result is no file)."""
    if detail["mode"] == "create":
        return [("size", f"{detail['size']} bytes ({detail['encoding']})"), ("sha256", detail["sha256"])]
    base = [
        ("base size", f"{detail['base_size']} bytes (the file before; `--base` prints them)"),
        ("base sha256", detail["base_sha256"]),
    ]
    if detail["mode"] == "delete":
        return base
    result = [("result size", f"{detail['size']} bytes ({detail['encoding']})"), ("result sha256", detail["sha256"])]
    return base + result


@click.group()
def audit() -> None:
    """Query and verify the tamper-evident audit log (read-only)."""


@audit.command()
@click.option("--status", type=click.Choice(STATUSES), help="Only proposals with this derived status.")
@click.option("--server", help="Only proposals for this downstream server.")
@SINCE
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="At most this many rows.")
@JSON
@pass_ctx
def proposals(ctx: Ctx, status: str | None, server: str | None, since: str | None, limit: int, as_json: bool) -> None:
    """List proposals, newest first, with their derived status."""
    with _reader(ctx) as reader:
        rows = reader.proposals(status=status, server=server, since=since, limit=limit)
    if as_json:
        for row in rows:
            emit_json(row.as_dict())
        return
    table(
        f"{len(rows)} proposal(s)" + (f" ({status})" if status else ""),
        ("id", "status", "mode", "server", "tool", "path", "size", "sha256", "created_at"),
        ((r.id, r.status, r.mode, r.server, r.tool, r.path, r.size, r.sha256[:12], r.created_at) for r in rows),
    )


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
@JSON
@pass_ctx
def show(ctx: Ctx, proposal_id: str, content: bool, base: bool, as_json: bool) -> None:
    """One proposal: mode, arguments, destination, base and result size and sha256, decision,
    commit outcome and events."""
    if content and base:
        raise click.UsageError("pass --content or --base, not both")
    with _reader(ctx) as reader:
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
        return
    if content or base:
        sys.stdout.buffer.write(raw if content else bytes(base_raw or b""))
        sys.stdout.flush()
        return
    kv(f"proposal {detail['id']}", _show_rows(detail))
    table(
        "events",
        ("seq", "at", "kind", "actor", "payload"),
        (
            (e["seq"], e["at"], e["kind"], e["actor"], json.dumps(e["payload"], ensure_ascii=False))
            for e in detail["events"]
        ),
    )


@audit.command()
@click.option("--kind", help="Only events of this kind (init, proposal_created, decision, commit_outcome, ...).")
@click.option("--proposal", "proposal_id", help="Only events about this proposal.")
@SINCE
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events as they are appended (Ctrl-C stops).")
@JSON
@pass_ctx
def log(ctx: Ctx, kind: str | None, proposal_id: str | None, since: str | None, follow: bool, as_json: bool) -> None:
    """Print audit events in order."""
    with _reader(ctx) as reader:
        if proposal_id is not None and not reader.has_proposal(proposal_id):
            raise NotFound(f"no proposal {proposal_id}", "`gatekeeper audit proposals` lists them")
        rows = reader.events(kind=kind, proposal_id=proposal_id, since=since)
        if as_json:
            for row in rows:
                emit_json(_event_json(row))
        else:
            table(
                None,
                ("seq", "at", "kind", "actor", "proposal", "payload"),
                ((r[0], r[1], r[2], r[3], r[4] or "", r[5]) for r in rows),
            )
        if not follow:
            return
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

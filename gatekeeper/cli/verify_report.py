"""What ``gatekeeper audit verify`` prints: one result, as text lines or one JSON object.

Kept apart from the command (``cli/audit.py``), which only runs the checks, so each stays small.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from gatekeeper.audit.checkpoints import CheckpointReport
from gatekeeper.cli.output import emit_json
from gatekeeper.store.chain import ChainReport


@dataclass(frozen=True)
class Checked:
    """How many of something were checked, and the problems found (each with a ``__dict__``)."""

    count: int
    problems: list[Any]


@dataclass(frozen=True)
class VerifyResult:
    chain: ChainReport
    marks: CheckpointReport
    expect_head: str | None = None
    files: Checked | None = None  # None: not asked for
    approvals: Checked | None = None
    rows: Checked | None = None  # reviewer and passkey rows (always checked by the command)
    outcomes: Checked | None = None  # commit_record rows and commit_outcome events, each with the other

    @property
    def ok(self) -> bool:
        extra = [c for c in (self.files, self.approvals, self.rows, self.outcomes) if c is not None]
        return self.chain.ok and self.marks.ok and not any(c.problems for c in extra)


def emit(result: VerifyResult, as_json: bool) -> None:
    if as_json:
        emit_json(as_dict(result))
        return
    echo_chain(result.chain)
    echo_checkpoints(result.marks)
    if result.rows is not None and result.rows.count:
        for r in result.rows.problems:
            click.echo(r.line())
        echo_total(result.rows, "reviewer and passkey row(s) (their signatures)")
    if result.outcomes is not None and (result.outcomes.count or result.outcomes.problems):
        for o in result.outcomes.problems:
            click.echo(f"OUTCOME of proposal {o.proposal_id}: {o.problem}")
        echo_total(result.outcomes, "commit outcome(s) (each row with its event)")
    if result.files is not None:
        for p in result.files.problems:
            click.echo(f"FILE {p.problem}: {p.path} (proposal {p.proposal_id})")
        echo_total(result.files, "committed file(s)")
    if result.approvals is not None:
        for a in result.approvals.problems:
            click.echo(f"APPROVAL of proposal {a.proposal_id} by {a.reviewer}: {a.problem}")
        echo_total(result.approvals, "approval(s) (decisions and quorum approvals)")


def as_dict(result: VerifyResult) -> dict[str, Any]:
    report, marks = result.chain, result.marks
    out: dict[str, Any] = {"ok": result.ok, "events": report.count, "head_seq": report.head_seq}
    out["head_hash"] = report.head_hash
    out |= {"checkpoints": marks.checked, "checkpoint_covers_seq": marks.last_seq}
    out["checkpoint_problems"] = [{"seq": seq, "reason": why} for seq, why in marks.problems]
    out["checkpoint_gaps"] = marks.gaps
    if result.expect_head is not None:
        out["expected_head"] = result.expect_head
    if report.problem:
        out["bad_seq"], out["reason"] = report.problem.seq, report.problem.reason
    if result.rows is not None:
        out["rows_checked"] = result.rows.count
        out["row_problems"] = [p.__dict__ for p in result.rows.problems]
    if result.outcomes is not None:
        out["outcomes_checked"] = result.outcomes.count
        out["outcome_problems"] = [p.__dict__ for p in result.outcomes.problems]
    if result.files is not None:
        out["files_checked"] = result.files.count
        out["file_problems"] = [p.__dict__ for p in result.files.problems]
    if result.approvals is not None:
        out["approvals_checked"] = result.approvals.count
        out["approval_problems"] = [p.__dict__ for p in result.approvals.problems]
    return out


def echo_chain(report: ChainReport) -> None:
    if report.problem and report.problem.saved_head:
        click.echo(f"FAILED at seq {report.problem.seq}: {report.problem.reason}")
        click.echo(f"  the chain itself verifies: {report.count} event(s), head seq {report.head_seq}")
    elif report.problem:
        click.echo(f"FAILED at seq {report.problem.seq}: {report.problem.reason}")
        click.echo(f"  {report.count} event(s) verified before it; last good seq {report.head_seq}")
    else:
        click.echo(f"OK: {report.count} events, head seq {report.head_seq} hash {report.head_hash}")


def echo_checkpoints(marks: CheckpointReport) -> None:
    for seq, why in marks.problems:
        click.echo(f"CHECKPOINT at seq {seq} FAILED: {why}")
    for why in marks.gaps:
        click.echo(f"CHECKPOINTS MISSING: {why}")
    if marks.checked:
        covers = f", the latest covers seq {marks.last_seq}" if marks.last_seq is not None else ""
        click.echo(f"{'OK' if marks.ok else 'FAILED'}: {marks.checked} signed checkpoint(s){covers}")


def echo_total(checked: Checked, what: str) -> None:
    n = len(checked.problems)
    click.echo(f"{'OK' if not n else 'FAILED'}: {checked.count} {what} checked, {n} problem(s)")

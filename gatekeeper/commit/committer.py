"""One pass of the committer: every approved proposal without an outcome, oldest first, those
with an interrupted attempt (an intent and no outcome) before all others.

Per batch, in the order that survived 533 kill -9s (shared notes, "Exactly once"):
the journal's word first (``held.py``: an approval it has applied is never applied again) →
checks (else ``refused``, nothing written) → intent events (one transaction) → the intents in the
committer's own journal, fsynced (``journal.py``) → file steps (a create: exclusive create beneath
the root; an existing identical file is ``created``, reconciled; anything else at the name is a
``conflict``. A change or delete: compare-and-swap against the approved base, ``swap.py``,
``applied``/``deleted`` or ``conflict``. An OS error is ``failed``) → one fsync per folder → the
outcomes in the journal, fsynced → outcome rows with their events (one transaction) → the
changes' temporary names removed. Every step is repeatable and each file step is exclusive or
decided from the disk, so a crash anywhere can only ever finish the work.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gatekeeper.commit import details, fsops, held, swap
from gatekeeper.commit.checks import Candidate, Plan, Refusal, check_root
from gatekeeper.commit.leftovers import Leftovers
from gatekeeper.commit.policy_source import PolicySource as PolicySource  # where callers import it
from gatekeeper.commit.quorum import check_all
from gatekeeper.commit.report import PassReport as PassReport  # where callers import them
from gatekeeper.commit.report import Result as Result
from gatekeeper.commit.switches import OFF, Switches
from gatekeeper.commit.trust import Trust
from gatekeeper.home import Home
from gatekeeper.policy import Policy
from gatekeeper.store.claims import Claims
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.workspace import beneath

FILE_WORKERS = 8  # file steps in flight within a batch (distinct paths only)
BATCH_BYTES = 64 * 1024 * 1024


class Committer:
    def __init__(
        self,
        home: Home,
        store: Store,
        reader: Reader,
        policy: PolicySource,
        *,
        batch: int = 64,
        workers: int = FILE_WORKERS,
        switches: Switches = OFF,
        actor: str = "committer",
        should_stop: Callable[[], bool] = lambda: False,
        on_result: Callable[[Result], None] | None = None,
        servers: frozenset[str] | None = None,
        claims: Claims | None = None,
        compact: bool = False,
    ) -> None:
        self.home, self.store, self.reader, self.policy = home, store, reader, policy
        self.servers = servers  # None: every server's approvals; else only these (``commit --server``)
        self.claims = claims or Claims(store.db_path)
        self.batch, self.workers, self.sw, self.actor = max(1, batch), max(1, workers), switches, actor
        self.should_stop, self.on_result = should_stop, on_result
        self.floor = 0  # every decision at or below this id has an outcome
        self.gate = held.Gate.of(home, store, actor)  # the committer's own journal, outside the database
        self.compact = compact  # it holds the exclusive commit.lock: it may rewrite the journal
        self._swept: set[tuple[int, int]] = set()  # folders swept of stale temporary names this pass
        self.leftovers = Leftovers(home.lock_path.parent)

    def run_pass(self) -> PassReport:
        policy = self.policy.current()
        trust = Trust.of(self.home)
        self._swept.clear()
        self.leftovers.sweep(self.servers, self.reader.proposal_state)
        self.gate.seed(self.reader)
        self.gate.journal.refresh()  # before the queue: a line read here had its intent committed before
        if self.compact and self.gate.journal.wasteful():
            self.gate.journal.compact()
        high, rows = self.reader.commit_queue(self.floor)
        self.sw.point("after_select")
        mine = (Candidate.from_row(r) for r in rows if self.servers is None or r["server"] in self.servers)
        queue = sorted(mine, key=lambda c: not c.has_intent)  # stable sort
        report = PassReport(queued=len(queue))
        for chunk in self._batches(queue):
            if report.stopped or self.should_stop():
                break
            with self.claims.claim([c.id for c in chunk]) as claimed:
                report.elsewhere.update(c.id for c in chunk if c.id not in claimed)
                if claimed:
                    self._batch([c for c in chunk if c.id in claimed], policy, trust, report)
        still_open = [c.decision_id for c in queue if c.id not in report.finished]
        self.floor = min(still_open) - 1 if still_open else high
        return report

    def _batches(self, queue: list[Candidate]) -> Iterator[list[Candidate]]:
        """At most ``batch`` proposals and about ``BATCH_BYTES`` of content each: a batch is held in memory."""
        chunk: list[Candidate] = []
        size = 0
        for c in queue:
            if chunk and (len(chunk) >= self.batch or size + c.size > BATCH_BYTES):
                yield chunk
                chunk, size = [], 0
            chunk.append(c)
            size += c.size
        if chunk:
            yield chunk

    # -- one batch ---------------------------------------------------------------------------

    def _batch(self, chunk: list[Candidate], policy: Policy, trust: Trust, report: PassReport) -> None:
        chunk = self._journaled(chunk, policy, report)
        contents = self.reader.proposal_contents([c.id for c in chunk])
        approvals = self.reader.approvals([c.id for c in chunk])  # the first N-1 of a rule's approvals: N
        refused: list[Result] = []
        ready: list[tuple[Candidate, bytes, Plan]] = []
        roots: dict[Path, int] = {}
        real: dict[Path, str] = {}  # where each opened root really is
        try:
            for c in chunk:
                data = contents.get(c.id)
                try:
                    plan = check_all(c, data, approvals.get(c.id, []), policy, trust)
                    if not self._open_root(plan.workspace, roots, real, report):
                        continue  # waits for a later pass
                    check_root(c, real[plan.workspace])
                    ready.append((c, data or b"", plan))
                except Refusal as exc:
                    detail = f"{exc}; nothing was written"
                    if c.has_intent and c.mode != "create":
                        detail += (
                            f" (an earlier attempt was interrupted after its intent: if {swap.tmp_name(c.id)} is "
                            f"beside {c.path!r}, that attempt had swapped the change in and the old bytes are there)"
                        )
                    elif c.has_intent:
                        detail += (
                            f" (an earlier attempt was interrupted after its intent: if {c.path!r} exists, "
                            "it is from then)"
                        )
                    refused.append(Result(c.id, c.path, "refused", detail))
            if refused:
                self._record(refused, report)
                self.sw.point("after_refusal")
            if ready:
                self._commit(ready, roots, report)
        finally:
            for fd in roots.values():
                if fd >= 0:
                    os.close(fd)

    def _journaled(self, chunk: list[Candidate], policy: Policy, report: PassReport) -> list[Candidate]:
        """The candidates the journal lets act; the others are recorded from it or held (``held.py``)."""
        through, replayed, holding = [], [], []
        for c in chunk:
            entry = self.gate.journal.get(c.id)
            verdict = held.judge(entry, c.has_intent)
            if verdict == held.ACT:
                through.append(c)
            elif verdict == held.RECORD and entry is not None and entry.outcome is not None:
                o = entry.outcome  # killed after the file step, before its outcome row: the disk is done
                replayed.append(Result(c.id, c.path, str(o["outcome"]), str(o.get("detail") or ""),
                                       o.get("observed_sha256"), o.get("final_path")))  # fmt: skip
            else:
                holding.append((c, verdict))
        self._hold(holding, report)
        self._record(replayed, report)
        done = {r.proposal_id for r in replayed}
        for c in (c for c in chunk if c.id in done):  # a change's temporary name holds its base: swept
            held.sweep_recorded(c, policy, self.reader.proposal_state)
        return through

    def _hold(self, holding: list[tuple[Candidate, str]], report: PassReport) -> None:
        for message in self.gate.hold(holding):
            if message not in report.waiting:
                report.waiting.append(message)

    def _open_root(self, workspace: Path, roots: dict[Path, int], real: dict[Path, str], report: PassReport) -> bool:
        """Open each workspace root once a batch, and learn where it really is; False: it cannot be opened."""
        if workspace not in roots:
            try:
                roots[workspace] = fd = beneath.open_root(workspace)
                real[workspace] = beneath.real_path(fd, workspace)
            except OSError as exc:
                roots[workspace] = -1
                message = (
                    f"the workspace {workspace} cannot be opened ({fsops.describe(exc)}); its approved "
                    "proposals wait until it is back (create or mount it, or fix the policy)"
                )
                if message not in report.waiting:
                    report.waiting.append(message)
        return roots[workspace] >= 0

    def _commit(self, ready: list[tuple[Candidate, bytes, Plan]], roots: dict[Path, int], report: PassReport) -> None:
        states = self.store.record_commit_intents(
            [c.id for c, _, _ in ready], self.actor, before_commit=lambda: self.sw.point("intent_tx_open")
        )
        self.sw.point("after_intent")
        lanes = self._lanes(ready, states, report)
        self.gate.intent([c for items in lanes.values() for c, _, _ in items])
        self.sw.point("after_journal_intent")
        done: dict[str, Result] = {}
        stop = threading.Event()
        dirs = fsops.DirSync()

        def lane(items: list[tuple[Candidate, bytes, Plan]]) -> None:
            for c, data, plan in items:
                if stop.is_set():
                    return
                done[c.id] = result = self._file_step(c, data, plan, roots[plan.workspace], dirs)
                if result.stop:
                    stop.set()

        try:
            if self.workers > 1 and len(lanes) > 1:
                # fsync waits for the journal: several files in flight share its commits (bench/).
                with ThreadPoolExecutor(min(self.workers, len(lanes))) as pool:
                    list(pool.map(lane, lanes.values()))
            else:
                for items in lanes.values():
                    lane(items)
            failures = dirs.sync(self.sw)
            results = [done[c.id] for c, _, _ in ready if c.id in done]
            busy = [r for r in results if r.outcome == "busy"]
            results = [r for r in results if r.outcome != "busy"]
            for r in busy:
                if r.detail not in report.waiting:
                    report.waiting.append(r.detail)
            report.stopped = next((r.detail for r in results if r.stop), None)
            for r in results:
                if r.dir_key in failures:
                    was = details.what_was_done(r.outcome, r.path, r.final_path)
                    r.outcome, r.stop = "failed", True
                    r.detail = (
                        f"{was}, but {failures[r.dir_key]}; it may not survive a power loss: "
                        "check the disk and the file, and propose again if it is not as approved"
                    )
                    report.stopped = r.detail
            self.sw.point("before_outcome")
            aside = [(c.server, plan.workspace, c.path) for c, _, plan in ready if c.id in done and done[c.id].leftover]
            noted = self.leftovers.note(aside)  # a kill from here on: the next pass removes them (leftovers.py)
            self.gate.done([r.record() for r in results])
            self.sw.point("after_journal_done")
            self._record(results, report)
            self.sw.point("after_outcome")
            self._clean_up(results, dirs)
            self.leftovers.cleared(noted)
        finally:
            dirs.close()

    def _lanes(
        self, ready: list[tuple[Candidate, bytes, Plan]], states: dict[str, str], report: PassReport
    ) -> dict[str, list[tuple[Candidate, bytes, Plan]]]:
        """The file steps to take, by path (one path: oldest first, one at a time), as the intents left them."""
        lanes: dict[str, list[tuple[Candidate, bytes, Plan]]] = {}
        for item in ready:
            state = states[item[0].id]
            if state == "done":
                report.finished.add(item[0].id)
            elif state == "outcome in chain":  # its commit_record row was deleted: never a second time
                self._hold([(item[0], held.in_chain_reason())], report)
            elif state in ("new", "existing"):
                lanes.setdefault(item[0].path, []).append(item)
        return lanes

    def _clean_up(self, results: list[Result], dirs: fsops.DirSync) -> None:
        """Once outcomes are recorded: remove each applied change's temporary name (its bytes, the
        base, are in the store), and sweep each folder once a pass of temporary names left by
        attempts killed after recording (their proposals have an outcome; only a name holding that
        proposal's own base or result bytes is removed: another writer's bytes put aside stay)."""
        for r in results:
            fd = dirs.fds.get(r.dir_key) if r.dir_key else None
            if fd is None:
                continue
            if r.leftover:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(r.leftover, dir_fd=fd)
            if r.change and r.dir_key not in self._swept:
                self._swept.add(r.dir_key)  # type: ignore[arg-type]
                swap.sweep(fd, self.reader.proposal_state)

    def _file_step(self, c: Candidate, data: bytes, plan: Plan, root_fd: int, dirs: fsops.DirSync) -> Result:
        if c.mode != "create":
            return self._change_step(c, data, plan, root_fd, dirs)
        parts = c.path.split("/")
        final = plan.final_path(c.path)

        def result(outcome: str, detail: str = "", **kw: Any) -> Result:
            return Result(c.id, c.path, outcome, detail, final_path=final, **kw)

        moved = (
            f"the folder holding {c.path!r} was moved or replaced while the file was being created; the new "
            "name was removed again and nothing was left behind; propose again"
        )
        try:
            dirfd = fsops.open_dir(root_fd, parts[:-1], self.sw, create=True)
        except beneath.InTheWay as exc:
            return result("conflict", f"{exc.detail}; nothing was written")
        except fsops.FsyncFailed as exc:
            return result("failed", f"{exc}; the file was not created", stop=True)
        except OSError as exc:
            return result("failed", f"cannot create the folders for {c.path!r}: {fsops.describe(exc)}; nothing written")
        self.sw.point("after_open_parent")
        try:
            published = self.sw.step("publish", fsops.publish)(dirfd, parts[-1], data, plan.mode, self.sw)
            if published.linked:
                if not fsops.still_in_place(plan.workspace, root_fd, parts[:-1], dirfd, self.sw):
                    fsops.unlink_if_ours(dirfd, parts[-1], published.ino)
                    return result("conflict", moved)
                key, dirfd = dirs.add(dirfd), -1
                return result("created", observed_sha256=c.sha256, linked=True, dir_key=key)
            existing = fsops.inspect(dirfd, parts[-1], c.sha256, len(data), self.sw)
            self.sw.point("after_reconcile_hash")
            if existing.kind == "file" and existing.sha256 == c.sha256:
                if not fsops.still_in_place(plan.workspace, root_fd, parts[:-1], dirfd, self.sw):
                    return result(
                        "conflict", f"the folder holding {c.path!r} was moved or replaced meanwhile; propose again"
                    )
                key, dirfd = dirs.add(dirfd), -1
                detail = "reconciled: a file with exactly the approved bytes was already there (an interrupted "
                detail += "earlier attempt, or someone else); nothing was overwritten"
                return result("created", detail, observed_sha256=c.sha256, dir_key=key)
            return result("conflict", details.in_the_way(c.path, existing), observed_sha256=existing.sha256)
        except fsops.FsyncFailed as exc:
            return result("failed", f"{exc}; nothing was linked under {c.path!r} by this attempt", stop=True)
        except OSError as exc:
            return result("failed", f"cannot create {c.path!r}: {fsops.describe(exc)}; nothing was written there")
        finally:
            if dirfd >= 0:
                os.close(dirfd)

    def _change_step(self, c: Candidate, data: bytes, plan: Plan, root_fd: int, dirs: fsops.DirSync) -> Result:
        """Replace, append, edit or delete an existing file by compare-and-swap (``swap.py``)."""
        parts = c.path.split("/")
        final = plan.final_path(c.path)

        def result(outcome: str, detail: str = "", **kw: Any) -> Result:
            return Result(c.id, c.path, outcome, detail, final_path=final, change=True, **kw)

        try:
            dirfd = fsops.open_dir(root_fd, parts[:-1], self.sw, create=False)
        except FileNotFoundError:
            return result("conflict", f"the folder holding {c.path!r} no longer exists; {swap.NOTHING}")
        except beneath.InTheWay as exc:
            return result("conflict", f"{exc.detail}; {swap.NOTHING}")
        except OSError as exc:
            return result("failed", f"cannot open the folder holding {c.path!r}: {fsops.describe(exc)}; {swap.NOTHING}")
        self.sw.point("after_open_parent")
        change = swap.Change(
            c.id, c.path, parts[-1], c.mode, data, c.sha256, c.base_sha256 or "", c.base_size or 0,
            plan.file_mode, c.has_intent,
        )  # fmt: skip
        try:
            act = swap.delete_file if c.mode == "delete" else self.sw.step("apply_change", swap.apply_change)
            done = act(dirfd, change, self.sw)
            if done.busy:
                return result("busy", f"another attempt at {c.id} is under way ({swap.tmp_name(c.id)} exists); later")
            key = None
            if done.sync:
                key, dirfd = dirs.add(dirfd), -1
            return result(done.outcome, done.detail, observed_sha256=done.observed_sha256, dir_key=key,
                          leftover=done.leftover)  # fmt: skip
        except fsops.FsyncFailed as exc:
            return result("failed", f"{exc}; {c.path!r} was not changed by this attempt", stop=True)
        except OSError as exc:
            return result(
                "failed",
                f"cannot {c.mode} {c.path!r}: {fsops.describe(exc)}; check the file: it holds either the whole old "
                "or the whole new version",
            )
        finally:
            if dirfd >= 0:
                os.close(dirfd)

    # -- outcomes ------------------------------------------------------------------------------

    def _record(self, results: list[Result], report: PassReport) -> None:
        if not results:
            return
        records = [r.record() for r in results]
        recorded = self.sw.step("record_outcomes", record_outcomes)(self.store, records, self.actor, self.sw)
        self.gate.recorded([r.proposal_id for r in results])
        for r in results:
            r.recorded = recorded[r.proposal_id]
            report.finished.add(r.proposal_id)
            report.results.append(r)
            if self.on_result is not None:
                self.on_result(r)


def record_outcomes(store: Store, records: list[dict[str, Any]], actor: str, sw: Switches) -> dict[str, bool]:
    """Outcome rows and their audit events, all in one transaction (the ``record_outcomes`` step)."""
    return store.record_commit_outcomes(records, actor, after_row=lambda _pid: sw.point("outcome_row_written"))

"""Committers on several machines: each approved proposal is claimed by one committer at a time.

PostgreSQL: a claim is a row lock, ``SELECT … FOR UPDATE SKIP LOCKED`` on the proposal's
``decision`` row, taken in a transaction of its own (on a connection of its own) that stays open
from before the batch's ``commit_intent`` transaction until its outcomes are committed. Another
committer skips what is claimed instead of waiting for it, so two committers never both act on
one proposal and never wait for each other. The lock cannot live in the intent's own transaction:
the intent must be committed (durable) before the file step, and COMMIT releases row locks.

Nothing else ever locks a decision row (it is append-only and no foreign key points at it), so
the store's own writes in between (intent events, outcome rows) cannot queue behind a claim.
A committer killed with -9 drops its connection and PostgreSQL releases its claims: the next
committer finishes what was interrupted, as after any crash. A claim lost with the connection
(the server restarted) only lets a second committer in; the file step is exclusive and the
outcome is recorded once, so that is still safe, as it was before claims.

SQLite: one writer at a time already (``BEGIN IMMEDIATE``) and one machine; every id is "claimed".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from gatekeeper.store.backends import Backend, backend_for, lost
from gatekeeper.store.target import Database

CHUNK = 500  # ids per IN (...)

_CLAIM_SQL = "SELECT proposal_id FROM decision WHERE verdict = 'approved' AND proposal_id IN ({marks}) "
_CLAIM_SQL += "FOR UPDATE SKIP LOCKED"


class Claims:
    """One connection that holds the current batch's claims (PostgreSQL), or nothing (SQLite)."""

    def __init__(self, db: Database) -> None:
        self.backend: Backend = backend_for(db)
        self.active = self.backend.name != "sqlite"
        self._conn: Any = None

    @contextmanager
    def claim(self, proposal_ids: list[str]) -> Iterator[set[str]]:
        """The ids this committer may act on until the block ends (the others are another's now)."""
        if not self.active or not proposal_ids:
            yield set(proposal_ids)
            return
        claimed = self._take_retrying(proposal_ids)
        try:
            yield claimed
        finally:
            self._release()

    def _take_retrying(self, proposal_ids: list[str]) -> set[str]:
        """``_take``, once more on a new connection when the kept one was dropped by the server (it
        restarted): claiming writes nothing, so trying again is safe."""
        for attempt in (1, 2):
            try:
                return self._take(proposal_ids)
            except self.backend.lost_errors as exc:
                self._drop()
                if attempt == 2:
                    raise lost(self.backend.database, exc) from exc
            except BaseException:
                self._release()
                raise
        raise AssertionError("unreachable")

    def _take(self, proposal_ids: list[str]) -> set[str]:
        """BEGIN, then lock what no one else holds; the transaction stays open (the claims)."""
        conn = self._connection()
        conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        claimed: set[str] = set()
        assert self.backend.translate is not None
        for start in range(0, len(proposal_ids), CHUNK):
            chunk = proposal_ids[start : start + CHUNK]
            sql = self.backend.translate(_CLAIM_SQL.format(marks=", ".join("?" * len(chunk))))
            claimed.update(row[0] for row in conn.execute(sql, chunk))
        return claimed

    def _connection(self) -> Any:
        if self._conn is not None and not self.backend.reusable(self._conn):
            self._drop()
        if self._conn is None:
            self._conn = self.backend.connect_writer()
        return self._conn

    def _release(self) -> None:
        """End the claim transaction (it wrote nothing); a connection that broke is dropped."""
        if self._conn is None:
            return
        try:
            self._conn.execute("ROLLBACK")
        except self.backend.lost_errors:
            self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            with suppress(Exception):
                self._conn.close()
            self._conn = None

    def close(self) -> None:
        self._drop()

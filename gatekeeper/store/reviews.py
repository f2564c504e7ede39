"""Reviewer sessions, single-use nonces and the log-in throttle: the review page's state, written
through the store's transactions with their audit events. No HTTP here; the review package turns
requests into calls."""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from datetime import timedelta

from gatekeeper.canonical import format_ts, now_ts, utc_now
from gatekeeper.store.events import LOGIN, LOGOUT, REVIEWER_ROW_REFUSED
from gatekeeper.store.queries import Reader
from gatekeeper.store.signed_rows import REVIEWER_COLUMNS, reviewer_problem
from gatekeeper.store.store import Store

__all__ = ["Reviews", "Session"]  # event kinds live in store/events.py only

# The throttle's one counter: a name's attempts in the window that failed or are still being checked.
COUNTED_ATTEMPTS = (
    "SELECT count(*) FROM login_attempt WHERE name_key = ? AND started_at >= ? "
    "AND (outcome IS NULL OR outcome = 'failed')"
)


@dataclass(frozen=True)
class Session:
    id: str
    reviewer: str
    expires_at: str


class Reviews:
    def __init__(self, store: Store) -> None:
        self.store = store
        # Reads run on every request: a read-only connection, not a write transaction.
        self._ro = Reader(store.db_path)
        self._lock = threading.Lock()

    def _one(self, sql: str, params: tuple[object, ...]) -> tuple[object, ...] | None:
        with self._lock:
            return self._ro.first(sql, params)

    def close(self) -> None:
        self._ro.close()

    def password_hash(self, name: str) -> str | None:
        """The stored hash of an enabled reviewer whose row is signed by the review side's key for its
        latest change, else None (unknown, disabled, a row written by anything else and an older row
        put back look alike: log-in fails)."""
        row = self._one(f"SELECT {REVIEWER_COLUMNS} FROM reviewer WHERE name = ? AND disabled_at IS NULL", (name,))
        if row is None:
            return None
        why = reviewer_problem(self._one, self.store.keyring(), row)
        if why is not None:  # not what Gatekeeper last wrote: say so in the log
            self.store.append_event(REVIEWER_ROW_REFUSED, "review", {"reviewer": name, "why": why})
            return None
        return str(row[1])

    def is_reviewer(self, name: str) -> bool:
        """A name of the reviewer table, enabled or not: safe to name in an event as typed."""
        return self._one("SELECT 1 FROM reviewer WHERE name = ?", (name,)) is not None

    def start_session(self, reviewer: str, ttl: timedelta, how: str) -> Session:
        sid = secrets.token_urlsafe(32)
        expires = format_ts(utc_now() + ttl)
        with self.store.transaction() as conn:
            conn.insert(
                "review_session", {"id": sid, "reviewer": reviewer, "created_at": now_ts(), "expires_at": expires}
            )
            # The session id is a bearer secret: the event names the session by a prefix only.
            conn.append_event(LOGIN, f"reviewer:{reviewer}", {"how": how, "session": sid[:8]})
        return Session(sid, reviewer, expires)

    def session(self, sid: str) -> Session | None:
        """A live session of an enabled reviewer; a disabled reviewer's sessions stop at once."""
        row = self._one(
            "SELECT s.reviewer, s.expires_at FROM review_session s JOIN reviewer r ON r.name = s.reviewer "
            "WHERE s.id = ? AND s.ended_at IS NULL AND s.expires_at > ? AND r.disabled_at IS NULL",
            (sid, now_ts()),
        )
        return Session(sid, str(row[0]), str(row[1])) if row else None

    def end_session(self, session: Session) -> None:
        with self.store.transaction() as conn:
            conn.run("UPDATE review_session SET ended_at = ? WHERE id = ? AND ended_at IS NULL", (now_ts(), session.id))
            conn.append_event(LOGOUT, f"reviewer:{session.reviewer}", {"session": session.id[:8]})

    def use_nonce(self, nonce: str, purpose: str) -> bool:
        """True the first time a nonce is used; False on every replay (UNIQUE does the work)."""
        try:
            with self.store.transaction() as conn:
                conn.insert("used_nonce", {"nonce": nonce, "purpose": purpose, "used_at": now_ts()})
        except self.store.backend.integrity_errors:
            return False
        return True

    # -- the log-in throttle -----------------------------------------------------------------

    def begin_login_attempt(self, name_key: str, limit: int, window: timedelta) -> int | None:
        """Count this attempt before its password is checked; None when the name is throttled.

        One BEGIN IMMEDIATE transaction counts the name's attempts in the window that failed or
        are still being checked, and inserts this one only if fewer than ``limit``: parallel
        requests serialise here, so no more than ``limit`` checks can run or have failed per
        name and window. An attempt that never finishes (a crash mid-check) counts as failed.
        """
        now = utc_now()
        since = format_ts(now - window)
        with self.store.transaction() as conn:
            conn.run("DELETE FROM login_attempt WHERE started_at < ?", (since,))
            row = conn.first(COUNTED_ATTEMPTS, (name_key, since))
            if row is not None and int(row[0]) >= limit:
                return None
            found = conn.first(
                "INSERT INTO login_attempt (name_key, started_at) VALUES (?, ?) RETURNING id",
                (name_key, format_ts(now)),
            )
        assert found is not None
        return int(found[0])

    def finish_login_attempt(self, attempt: int, ok: bool) -> None:
        """A successful check stops counting against the name; a failed one keeps counting."""
        with self.store.transaction() as conn:
            conn.run("UPDATE login_attempt SET outcome = ? WHERE id = ?", ("ok" if ok else "failed", attempt))

    def attempts_left(self, name_key: str, limit: int, window: timedelta) -> int:
        """How many more passwords the name may try before the throttle refuses it: the very count
        ``begin_login_attempt`` checks (failed or unfinished attempts in the window), from ``limit``."""
        row = self._one(COUNTED_ATTEMPTS, (name_key, format_ts(utc_now() - window)))
        return max(0, limit - (int(str(row[0])) if row is not None else 0))

"""Refusal events that a stranger cannot turn into a flood of the append-only log.

Anyone who can reach the port can make the page refuse something (a bad ``Host``, a stale form,
a wrong password), and every refusal was an event: 100 requests with a 12,000-byte ``Host``
appended 2.3 MiB in a second, and a log that is append-only can never shrink again. The proxy
is in the same place: a host (or whatever drives it) can send unparseable lines, call unknown
tools (a 12 MiB tool name was once stored whole) and make proposals that are refused, as fast as
it likes. Both the review page and the proxy record their refusals here. So:

- every field is bounded (``store/bounded.py``): strings cut to 200 characters plus their
  original length; the caller never passes a typed password, and passes a typed name that is no
  reviewer only as a keyed tag (``Tokens.name_tag``);
- identical refusals are counted, not stored: the first one of a kind, actor and (bounded)
  payload is stored whole; identical ones after it only increment an in-memory counter, which
  is flushed as one ``refusal_repeated`` event ``{first_seq, repeats, ...}`` when ``WINDOW``
  seconds have passed since the first, when ``MAX_PENDING`` repeats (of all kinds together) are
  waiting, when more than ``MAX_KEYS`` distinct refusals are open, and at shutdown.

Across a restart: a clean stop (SIGTERM, Ctrl-C) flushes every counter, so nothing is lost. A
crash (SIGKILL, power loss) loses at most the counters not yet flushed: fewer than
``MAX_PENDING`` repeats in total, all from the last ``WINDOW`` seconds, and each of them a repeat
of an event that is in the log whole. The count is lost, never the kind of refusal. Keeping the
counters in the database instead would cost a durable write per refused request, which is the
flood this module exists to stop.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gatekeeper.canonical import canonical_json, now_ts
from gatekeeper.store.bounded import bounded
from gatekeeper.store.events import REFUSAL_REPEATED
from gatekeeper.store.store import Store

WINDOW = 10.0  # seconds
MAX_PENDING = 1000
MAX_KEYS = 256


@dataclass
class _Open:
    kind: str
    actor: str
    first_seq: int
    opened: float  # monotonic
    repeats: int = 0
    last_at: str = ""


class Refusals:
    """Thread-safe: routes run in a thread pool. Writes happen under one lock, which SQLite's
    single writer would impose anyway, so two identical refusals never both count as first."""

    def __init__(
        self,
        store: Store,
        *,
        window: float = WINDOW,
        max_pending: int = MAX_PENDING,
        max_keys: int = MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.window, self.max_pending, self.max_keys, self.clock = (
            store,
            window,
            max_pending,
            max_keys,
            clock,
        )
        self._open: dict[str, _Open] = {}
        self._pending = 0
        self._lock = threading.Lock()

    def record(self, kind: str, actor: str, payload: dict[str, Any], *, coalesce: bool = True) -> None:
        """Store a refusal with bounded fields, or count it if an identical one is open.

        ``coalesce=False`` for refusals already bounded in number elsewhere (a checked wrong
        password: the throttle lets five through per name and window), which stay one event each.
        """
        fields = bounded(payload)
        with self._lock:
            if not coalesce:
                self.store.append_event(kind, actor, fields)
                return
            key = hashlib.sha256(canonical_json([kind, actor, fields]).encode()).hexdigest()
            now = self.clock()
            entry = self._open.get(key)
            if entry is not None and now - entry.opened < self.window:
                entry.repeats += 1
                entry.last_at = now_ts()
                self._pending += 1
                if self._pending >= self.max_pending:
                    self._flush(lambda _e: True)
                return
            if entry is not None:
                self._flush(lambda e: e is entry)
            if len(self._open) >= self.max_keys:
                self._flush(lambda _e: True)
            event = self.store.append_event(kind, actor, fields)
            self._open[key] = _Open(kind, actor, event.seq, now)

    def flush_due(self) -> None:
        """Flush the counters whose window has passed (called about once a second)."""
        with self._lock:
            now = self.clock()
            self._flush(lambda e: now - e.opened >= self.window)

    def flush_all(self) -> None:
        """Flush every counter: at shutdown, so a clean restart loses no count."""
        with self._lock:
            self._flush(lambda _e: True)

    def _flush(self, due: Callable[[_Open], bool]) -> None:
        for key, entry in list(self._open.items()):
            if not due(entry):
                continue
            del self._open[key]
            if entry.repeats:
                self._pending -= entry.repeats
                self.store.append_event(
                    REFUSAL_REPEATED,
                    entry.actor,
                    {
                        "kind": entry.kind,
                        "first_seq": entry.first_seq,
                        "repeats": entry.repeats,
                        "last_at": entry.last_at,
                        "why": f"refusal #{entry.first_seq} repeated {entry.repeats} more times",
                    },
                )

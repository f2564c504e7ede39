"""The values some columns may hold: shared by the tables (``schema``) and the code that writes
them (``store``, ``commits``), kept here so that the writers need not load SQLModel."""

from __future__ import annotations

VERDICTS = ("approved", "rejected")
MODES = ("create", "replace", "append", "edit", "delete")
OUTCOMES = ("created", "applied", "deleted", "conflict", "refused", "failed")
DONE_OUTCOMES = ("created", "applied", "deleted")  # the proposal's change is on disk: status 'committed'

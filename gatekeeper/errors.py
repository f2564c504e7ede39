"""Domain errors: each says what went wrong, then what to do next.

The edges (CLI, HTTP, MCP) turn these into messages; no traceback reaches a user.
"""

from __future__ import annotations


class GatekeeperError(Exception):
    """Base class. ``str(err)`` is a complete sentence a person can act on."""

    exit_code: int = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class HomeMissing(GatekeeperError):
    """The Gatekeeper home or its database does not exist yet."""


class SchemaTooOld(GatekeeperError):
    """The database predates the code: `gatekeeper db upgrade` fixes it."""


class SchemaTooNew(GatekeeperError):
    """The database was migrated by a newer Gatekeeper than this one."""


class PolicyError(GatekeeperError):
    """policy.yaml cannot be loaded; the message names the file, key path and line."""

    exit_code = 2


class NotFound(GatekeeperError):
    """A proposal (or other record) named by the user does not exist."""


class Conflict(GatekeeperError):
    """A state change that would break an invariant (second decision, second outcome, ...)."""


class InvalidInput(GatekeeperError):
    """A value given by a user or a peer is malformed."""

    exit_code = 2

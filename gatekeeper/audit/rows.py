"""``audit verify``: every reviewer and passkey row checked against its signature, as the review page
and the committer check one when it is used (``store/signed_rows.py``).

They check a row only when someone logs in or approves with it, so a password hash replaced or a
passkey's public key swapped in the database would otherwise go unseen until it was used. Public
keys only: a verify-only home checks them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gatekeeper.store.queries import Reader
from gatekeeper.store.signed_rows import every_row, passkey_problem, reviewer_problem

if TYPE_CHECKING:
    from gatekeeper.trust.keys import KeyRing


@dataclass(frozen=True)
class RowProblem:
    table: str  # "reviewer" or "passkey"
    reviewer: str
    credential_id: str | None  # the passkey's; None for a reviewer row
    problem: str  # why the row does not hold
    action: str  # what to do about it

    def line(self) -> str:
        """One line for the text report, naming the row, what is wrong and what to do."""
        which = (
            f"REVIEWER {self.reviewer}"
            if self.credential_id is None
            else f"PASSKEY {self.credential_id} of {self.reviewer}"
        )
        return f"{which}: {self.problem}; {self.action}"


def verify_rows(reader: Reader, keyring: KeyRing) -> tuple[int, list[RowProblem]]:
    """Every reviewer row, then every passkey row: (how many were checked, the problems). Rows with
    no signature in a home without keys yet are skipped: they are signed, as they are, when the
    first key is made (``home.ensure_keys``)."""
    reviewers, passkeys = every_row(reader)
    walks = ((reviewers, reviewer_problem, _reviewer_row), (passkeys, passkey_problem, _passkey_row))
    checked, problems = 0, []
    for rows, problem_of, named in walks:
        for row in rows:
            if row["signature"] is None and not keyring.public:
                continue
            checked += 1
            why = problem_of(reader.first, keyring, tuple(row.values()))
            if why is not None:
                problems.append(named(row, why))
    return checked, problems


def _reviewer_row(row: dict[str, Any], why: str) -> RowProblem:
    return RowProblem("reviewer", row["name"], None, why, _reviewer_action(row["name"]))


def _passkey_row(row: dict[str, Any], why: str) -> RowProblem:
    name, credential = row["reviewer"], row["credential_id"]
    return RowProblem("passkey", name, credential, why, passkey_action(name, credential))


def _reviewer_action(name: str) -> str:
    return (
        f"{name} cannot log in or approve while it stands. Find out who could write the database, then "
        f"sign the row afresh: `gatekeeper reviewer disable {name}`, or, to keep {name} (first check that "
        f"`gatekeeper reviewer list` shows the state you expect), `gatekeeper reviewer passwd {name}`"
    )


def passkey_action(name: str, credential: str) -> str:
    # "--": a credential id is base64url and may start with "-", which click would take for an option.
    return (
        "it cannot log in or approve while it stands. Find out who could write the database, then "
        f"`gatekeeper reviewer passkey-remove -- {name} {credential}` removes it for good ({name} enrols again)"
    )

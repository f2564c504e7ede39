"""Start a committer: check the home, schema, key and policy, take the lock, open the store."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing, contextmanager, nullcontext

from gatekeeper.commit.committer import Committer, Result
from gatekeeper.commit.lock import CommitLock
from gatekeeper.commit.policy_source import PolicySource
from gatekeeper.commit.switches import Switches
from gatekeeper.errors import InvalidInput
from gatekeeper.home import Home
from gatekeeper.policy import Policy
from gatekeeper.store.claims import Claims
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.store.target import Database, PostgresUrl
from gatekeeper.store.version import check_schema


def chosen_servers(policy: Policy, names: tuple[str, ...]) -> frozenset[str] | None:
    """``--server`` names (None: every server), each one the policy's; else a clear error."""
    if not names:
        return None
    unknown = sorted(set(names) - set(policy.servers))
    if unknown:
        raise InvalidInput(
            f"--server {', '.join(repr(n) for n in unknown)}: not a server of the policy {policy.source}",
            f"its servers are: {', '.join(sorted(policy.servers))}",
        )
    return frozenset(names)


def database_errors(database: Database) -> tuple[type[BaseException], ...]:
    """What the store's driver raises beyond the domain errors (a lost PostgreSQL connection is
    ``DatabaseUnreachable`` already): caught at the edge and said in one line, never a traceback."""
    if isinstance(database, PostgresUrl):
        import psycopg

        return (sqlite3.Error, psycopg.Error)
    return (sqlite3.Error,)


@contextmanager
def session(
    home: Home,
    policy_file: str | None,
    *,
    batch: int,
    switches: Switches,
    on_result: Callable[[Result], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    servers: tuple[str, ...] = (),
) -> Iterator[tuple[Committer, Reader]]:
    """Everything a committer needs, or a ``GatekeeperError`` saying what is missing."""
    home.require()
    database = home.database  # SQLite in the home, or a team's PostgreSQL
    check_schema(database)
    home.keys.keyring()  # unreadable public keys stop us here
    policy = PolicySource(policy_file, home.path)
    chosen = chosen_servers(policy.current(), servers)  # a broken policy stops us before the lock
    lock: AbstractContextManager[object] = nullcontext() if switches.no_lock else CommitLock(home.lock_path, chosen)
    with (
        lock,
        Store(database, keys_dir=home.keys.folder) as store,
        Reader(database) as reader,
        closing(Claims(database)) as claims,
    ):
        yield (
            Committer(
                home,
                store,
                reader,
                policy,
                batch=batch,
                switches=switches,
                on_result=on_result,
                should_stop=should_stop,
                servers=chosen,
                claims=claims,
                compact=chosen is None and not switches.no_lock,  # no other committer of this home runs
            ),
            reader,
        )

"""Start a committer: check the home, schema, key and policy, take the lock, open the store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from gatekeeper.commit.committer import Committer, PolicySource, Result
from gatekeeper.commit.lock import CommitLock
from gatekeeper.commit.testing import Switches
from gatekeeper.home import Home
from gatekeeper.store.queries import Reader
from gatekeeper.store.store import Store
from gatekeeper.store.version import check_schema


@contextmanager
def session(
    home: Home,
    policy_file: str | None,
    *,
    batch: int,
    switches: Switches,
    on_result: Callable[[Result], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> Iterator[tuple[Committer, Reader]]:
    """Everything a committer needs, or a ``GatekeeperError`` saying what is missing."""
    home.require()
    check_schema(home.db_path)
    home.keys.keyring()  # unreadable public keys stop us here
    policy = PolicySource(policy_file, home.path)
    policy.current()  # a broken policy stops us before the lock, with file and line
    lock: AbstractContextManager[object] = nullcontext() if switches.no_lock else CommitLock(home.lock_path)
    with lock, Store(home.db_path) as store, Reader(home.db_path) as reader:
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
            ),
            reader,
        )

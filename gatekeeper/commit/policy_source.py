"""The policy a committer checks each approval against: the file, read again whenever it changes."""

from __future__ import annotations

import os
from pathlib import Path

from gatekeeper.policy import Policy, load_policy


class PolicySource:
    """The policy file, read again whenever it changes on disk, so each pass checks the current one."""

    def __init__(self, policy_file: str | None, home: Path) -> None:
        self._file, self._home = policy_file, home
        self._policy: Policy | None = None
        self._signature: tuple[int, int, int] | None = None

    def current(self) -> Policy:
        if self._policy is not None:
            try:
                st = os.stat(self._policy.source)
                signature = (st.st_ino, st.st_size, st.st_mtime_ns)
            except OSError:
                signature = None
            if signature is not None and signature == self._signature:
                return self._policy
        self._policy = None  # a policy that no longer loads is never used stale
        policy = load_policy(self._file, home=self._home)
        st = os.stat(policy.source)
        self._policy, self._signature = policy, (st.st_ino, st.st_size, st.st_mtime_ns)
        return policy

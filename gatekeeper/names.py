"""What a name is: servers, tool prefixes and reviewers share one grammar, defined here once.

A name starts with a lowercase letter and goes on with lowercase letters, digits, ``_`` and
``-``: safe in a tool name, a URL, a log line and a shell. The kinds differ only in what each
always allowed (kept, so no policy or reviewer that worked stops working): reviewer names may
also hold ``.`` (people write ``first.last``), and a prefix has no length limit of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"[a-z][a-z0-9_.-]*")


@dataclass(frozen=True)
class NameRule:
    """One kind of name: the shared grammar, whether ``.`` is allowed, and a length limit."""

    what: str
    dots: bool = False
    max_len: int | None = 32

    def allows(self, text: str) -> bool:
        return (
            _NAME.fullmatch(text) is not None
            and (self.dots or "." not in text)
            and (self.max_len is None or len(text) <= self.max_len)
        )

    @property
    def rule(self) -> str:
        """The rule in words, for error messages that say how to fix the name."""
        chars = "a-z, 0-9, '.', '_' and '-'" if self.dots else "a-z, 0-9, '_' and '-'"
        limit = f" (at most {self.max_len} characters)" if self.max_len else ""
        return f"must start with a lowercase letter and use only {chars}{limit}"


SERVER = NameRule("server name")
PREFIX = NameRule("prefix", max_len=None)
REVIEWER = NameRule("reviewer name", dots=True)

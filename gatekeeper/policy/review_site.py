"""The policy's ``review:`` section (issue 15): which Host names and Origins the review page answers.

A team reaches the page by a public name (``https://review.example.com``), often through a reverse
proxy. The page refuses every Host it was not told about (DNS rebinding) and every change posted
from an Origin it was not told about (CSRF); the policy's ``review_url`` is allowed by itself, and
these lists add further names, for instance a second name of the same proxy.

Values are written as a browser sends them: a Host is ``name`` or ``name:port`` (no scheme); an
Origin is ``scheme://name[:port]`` with no path. Default ports are dropped, as browsers drop them.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, StrictStr

from gatekeeper.origins import DEFAULT_PORTS, origin_of
from gatekeeper.policy.messages import fail

__all__ = ["ReviewSite"]

_NAME = r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*|\[[0-9a-f:.]+\])"
_HOST = re.compile(rf"{_NAME}(?::[0-9]{{1,5}})?")


def _host(value: str) -> str:
    lowered = value.lower()
    if "://" in lowered or not _HOST.fullmatch(lowered):
        fail(f"expected a host as a browser sends it, such as 'review.example.com' or 'review.lan:8443', got {value!r}")
    return lowered


def _origin(value: str) -> str:
    lowered = value.lower().rstrip("/")
    scheme, _, rest = lowered.partition("://")
    if scheme not in DEFAULT_PORTS or not _HOST.fullmatch(rest):
        fail(f"expected an origin such as 'https://review.example.com' (scheme and host, no path), got {value!r}")
    try:
        return origin_of(lowered)
    except ValueError:  # a port out of range
        fail(f"expected an origin such as 'https://review.example.com' (scheme and host, no path), got {value!r}")


Host = Annotated[StrictStr, AfterValidator(_host)]
Origin = Annotated[StrictStr, AfterValidator(_origin)]


class ReviewSite(BaseModel):
    """``review: {hosts: [...], origins: [...]}``: more names the page answers, besides loopback and
    the ``review_url``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    hosts: tuple[Host, ...] = ()
    origins: tuple[Origin, ...] = ()

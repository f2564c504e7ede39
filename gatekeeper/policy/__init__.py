"""Load and validate policy.yaml: which servers run, and what each of their tools may do.

The policy is the one file a person edits by hand, so every mistake must come back as one
line that names the file, the line, the key path and, where it can, the key they meant.
Everything else (the proxy, the committer, ``gatekeeper policy check``) trusts the frozen
``Policy`` this package returns and never re-reads the YAML itself.

Modules, each depending only on those listed after it: ``loader`` (YAML, error messages,
finding the file), ``model`` (the pydantic models), ``scalars`` (durations, modes, names,
paths), ``globs``, ``templating`` and ``messages`` (how problems are worded).

Importing the package itself loads nothing: each name below loads on first use (PEP 562), so
``launch`` and ``commands`` (stdlib and PyYAML only) serve ``gatekeeper proxy`` before pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gatekeeper.policy.globs import glob_match
    from gatekeeper.policy.loader import load_policy
    from gatekeeper.policy.model import (
        DEFAULT_REVIEW_URL,
        RESERVED_TOOL,
        Defaults,
        Policy,
        Propose,
        Server,
        Source,
        ToolRule,
    )
    from gatekeeper.policy.templating import TemplateRenderError, render_template, slug

__all__ = [
    "DEFAULT_REVIEW_URL",
    "RESERVED_TOOL",
    "Defaults",
    "Policy",
    "Propose",
    "Server",
    "Source",
    "TemplateRenderError",
    "ToolRule",
    "glob_match",
    "load_policy",
    "render_template",
    "slug",
]

_HOME = {
    "glob_match": "globs",
    "load_policy": "loader",
    "TemplateRenderError": "templating",
    "render_template": "templating",
    "slug": "templating",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"gatekeeper.policy.{_HOME.get(name, 'model')}"), name)
    globals()[name] = value
    return value

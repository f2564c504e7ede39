"""Load and validate policy.yaml: which servers run, and what each of their tools may do.

The policy is the one file a person edits by hand, so every mistake must come back as one
line that names the file, the line, the key path and, where it can, the key they meant.
Everything else (the proxy, the committer, ``gatekeeper policy check``) trusts the frozen
``Policy`` this package returns and never re-reads the YAML itself.

Modules, each depending only on those listed after it: ``loader`` (YAML, error messages,
finding the file), ``model`` (the pydantic models), ``scalars`` (durations, modes, names,
paths), ``globs``, ``templating`` and ``messages`` (how problems are worded).
"""

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

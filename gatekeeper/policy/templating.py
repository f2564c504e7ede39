"""Policy templates: sandboxed Jinja2 over a tool call's arguments, plus the ``slug`` filter.

The arguments come from the model, so templates run in a sandbox with undefined names as
errors, and every failure the arguments cause is the caller's (``TemplateRenderError``),
while a template that does not compile is the policy author's (``PolicyError``).

Jinja2 (~20 ms of imports) loads on the first template compiled: a policy without templates,
and the proxy serving it, never pays for it.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gatekeeper.errors import InvalidInput, PolicyError

if TYPE_CHECKING:
    from jinja2 import Template
    from jinja2.sandbox import SandboxedEnvironment

__all__ = ["TemplateRenderError", "compile_template", "environment", "render_template", "slug", "syntax_error"]


class TemplateRenderError(InvalidInput):
    """A policy template could not be rendered from a tool call's arguments.

    The arguments come from the model, so this is the caller's problem to fix (a tool error),
    not a policy problem; a template that does not even compile is a ``PolicyError``.
    """


def slug(value: object, max_length: int = 80) -> str:
    """Turn free text into a safe file-name part: lowercase ASCII, '-' between words."""
    text = unicodedata.normalize("NFKD", str(value)).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return text[:max_length].rstrip("-") or "untitled"


@functools.cache
def _jinja() -> SandboxedEnvironment:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters["slug"] = slug
    return env


def environment() -> SandboxedEnvironment:
    """The one sandboxed environment templates compile in (``policy.arguments`` parses with it)."""
    return _jinja()


@functools.lru_cache(maxsize=256)
def compile_template(source: str) -> Template:
    """Compile (and cache) a template; raises ``jinja2.TemplateSyntaxError`` if it is broken."""
    return _jinja().from_string(source)


def syntax_error(source: str) -> str | None:
    """Why ``source`` does not compile (message and line), or None if it does."""
    from jinja2 import TemplateSyntaxError

    try:
        compile_template(source)
    except TemplateSyntaxError as exc:
        return f"{exc.message} (template line {exc.lineno})"
    return None


def render_template(source: str, args: Mapping[str, Any]) -> str:
    """Render a policy template with the tool's argument object as ``args``.

    Raises ``PolicyError`` if the template itself is broken, and ``TemplateRenderError`` (an
    ``InvalidInput``) for anything the arguments cause: a missing argument (StrictUndefined),
    a sandbox violation such as ``{{ ''.__class__ }}``, or any other runtime failure.
    """
    from jinja2 import TemplateError, TemplateSyntaxError

    try:
        template = compile_template(source)
    except TemplateSyntaxError as exc:
        raise PolicyError(f"template {source!r} is not valid: {exc.message} (line {exc.lineno})") from exc
    try:
        return template.render(args=args)
    except TemplateError as exc:
        raise TemplateRenderError(f"cannot render template {source!r}: {exc.message or exc}") from exc
    except Exception as exc:  # the arguments are untrusted: any failure is the caller's to fix
        raise TemplateRenderError(f"cannot render template {source!r}: {exc}") from exc

"""Which executable a server's ``command`` starts, found exactly as the proxy will launch it.

The proxy hands the SDK ``StdioServerParameters(command, args, env=server.env, cwd=server.cwd)``.
The SDK gives the child only a few variables of the proxy's own environment (``INHERITED``)
with the server's ``env`` laid over them, and the OS then looks a bare command up on *that*
``PATH`` (relative entries against the child's working folder). A host, in turn, starts the
proxy with the entry's ``env`` and its own minimal ``PATH``. So "is ``python`` on my PATH" in
a shell says little; this module answers the real question once, for the proxy's downstream
start, ``gatekeeper policy check`` and ``gatekeeper host-config`` alike, and says in a sentence
why a command would not start. No MCP import here: the SDK's list is copied (a test keeps the
two equal).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gatekeeper.policy.model import Policy, Server

# mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS on POSIX: all a child gets of its parent's env.
INHERITED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
_SHEBANG_MAX = 256


def child_env(server_env: Mapping[str, str], parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the SDK gives a child: the inherited variables, then the server's env."""
    parent = os.environ if parent is None else parent
    inherited = {k: parent[k] for k in INHERITED if k in parent and not parent[k].startswith("()")}
    return inherited | dict(server_env)


def search_path(env: Mapping[str, str]) -> str:
    """The PATH a lookup in ``env`` uses (the OS default when it has none)."""
    return env.get("PATH", os.defpath)


@dataclass(frozen=True)
class Resolved:
    """What ``command`` starts: ``path`` (absolute) when it can, else ``problem`` says why not."""

    command: str
    path: str | None
    problem: str | None
    search: str

    @property
    def ok(self) -> bool:
        return self.problem is None


def resolve(
    command: str, env: Mapping[str, str], cwd: str | os.PathLike[str], parent: Mapping[str, str] | None = None
) -> Resolved:
    """Find the executable ``command`` names for a child with ``env`` (the server's) in ``cwd``.

    A name with a slash is taken as it is (the policy loader already made ``./x`` absolute);
    a bare name is looked up on the child's PATH, as execvp does. The found file must be an
    executable regular file, and a script's ``#!`` interpreter must exist too.
    """
    full = child_env(env, parent)
    search = search_path(full)
    base = Path(cwd)
    if "/" in command:
        path = base / command
        problem = _unstartable(path, full, base)
        return Resolved(command, None if problem else str(path), problem, search)
    found, rejected = _lookup(command, search, base)
    if found is not None:
        problem = _unstartable(found, full, base)
        return Resolved(command, None if problem else str(found), problem, search)
    why = f" ({rejected})" if rejected else ""
    return Resolved(
        command,
        None,
        f"command {command!r} not found on PATH ({search}){why}; use an absolute path or set PATH in the server's env",
        search,
    )


def _lookup(name: str, search: str, base: Path) -> tuple[Path | None, str | None]:
    """The first executable file ``name`` on ``search``, as execvp finds it; else why a match was skipped."""
    rejected: str | None = None
    for folder in search.split(os.pathsep):
        candidate = base / (folder or ".") / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate, None
        if rejected is None and (candidate.is_dir() or candidate.is_file()):
            rejected = f"{candidate} is {'a directory' if candidate.is_dir() else 'not executable'}"
    return None, rejected


def resolve_server(server: Server, parent: Mapping[str, str] | None = None) -> Resolved:
    """``resolve`` for one policy server, with the proxy's environment ``parent`` (default: ours)."""
    assert server.command is not None, "an HTTP server has no command"
    return resolve(server.command, server.env, server.cwd, parent)


def executable(server: Server) -> str:
    """The ``command=`` the proxy hands the SDK: the resolved absolute path.

    When it cannot be resolved, the command as written, so the start fails the usual way
    (and ``gatekeeper policy check`` explains why).
    """
    return resolve_server(server).path or server.command or ""


def command_problems(policy: Policy, parent: Mapping[str, str] | None = None) -> list[str]:
    """One ``file:line: key: why`` sentence per server whose command would not start."""
    problems = []
    for name, server in policy.servers.items():
        if server.is_remote:
            continue
        found = resolve_server(server, parent)
        if found.problem:
            problems.append(f"{policy.where(('servers', name, 'command'))}: server {name!r}: {found.problem}")
    return problems


def _unstartable(path: Path, env: Mapping[str, str], cwd: Path) -> str | None:
    """Why ``path`` cannot be executed (None when it can)."""
    if not path.exists():
        return f"command {str(path)!r} does not exist"
    if path.is_dir():
        return f"command {str(path)!r} is a directory, not a program"
    if not os.access(path, os.X_OK):
        return f"command {str(path)!r} is not executable (chmod +x {path})"
    try:
        with open(path, "rb") as f:
            head = f.read(_SHEBANG_MAX)
    except OSError:
        return None  # executable but not readable (mode 0711): nothing more to check
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return f"command {str(path)!r} starts with an empty #! line"
    interpreter = cwd / words[0]
    if not (interpreter.is_file() and os.access(interpreter, os.X_OK)):
        return f"command {str(path)!r} needs the #! interpreter {words[0]}, which does not exist or is not executable"
    if interpreter.name == "env":
        name = next((w for w in words[1:] if not w.startswith("-") and "=" not in w), None)
        if name is not None and "/" not in name:
            search = search_path(env)
            if _lookup(name, search, cwd)[0] is None:
                return f"command {str(path)!r} runs `env {name}` (its #! line), and {name!r} is not on PATH ({search})"
    return None

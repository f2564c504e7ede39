"""How each downstream server is launched, read from the policy as plain data, before pydantic.

``gatekeeper proxy`` spawns its children before it imports the policy models and the MCP SDK
(issue 12: the proxy starts as fast as its slowest server). This module reads only the
``servers`` section with PyYAML and resolves ``command``, ``args``, ``cwd`` and ``env`` exactly as
``model.Server`` and ``commands.executable`` do (a test compares the two on every example
policy). It never reports an error: anything unexpected means "no early start", and the full
loader then says what is wrong. It also owns which file is the policy (``find_policy``), so
the early read and the loader can never pick different files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gatekeeper.errors import PolicyError
from gatekeeper.policy.commands import child_env, resolve


@dataclass(frozen=True)
class Launch:
    """One server's process as the proxy starts it: argv, the child's whole environment, cwd."""

    name: str
    command: str  # what ``commands.executable`` gives: the resolved path, else as written
    args: tuple[str, ...]
    env: dict[str, str]  # the server's own ``env`` (``child_env`` lays it over the inherited ones)
    cwd: Path
    given: str  # ``Server.command``: as written, a path made absolute (for the log's start line)

    @property
    def argv(self) -> list[str]:
        return [self.command, *self.args]

    def environment(self) -> dict[str, str]:
        return child_env(self.env)


def find_policy(path: str | os.PathLike[str] | None, home: Path | None) -> tuple[Path, str]:
    """Pick the policy file: explicit path, then $GATEKEEPER_POLICY, ./policy.yaml, home/policy.yaml."""
    if path is not None:
        given = os.fspath(path)
        if not Path(given).is_file():
            what = "is a directory, not a policy file" if Path(given).is_dir() else "no such policy file"
            raise PolicyError(f"{given}: {what}", "check the --policy path")
        return Path(given), given
    env = os.environ.get("GATEKEEPER_POLICY")
    if env:
        if not Path(env).is_file():
            raise PolicyError(f"$GATEKEEPER_POLICY is {env}, which is not a file", "fix or unset GATEKEEPER_POLICY")
        return Path(env), env
    if Path("policy.yaml").is_file():
        return Path("policy.yaml"), "policy.yaml"
    looked = ["$GATEKEEPER_POLICY (not set)", str(Path.cwd() / "policy.yaml")]
    if home is not None:
        candidate = Path(home) / "policy.yaml"
        if candidate.is_file():
            return candidate, str(candidate)
        looked.append(str(candidate))
    raise PolicyError(
        "no policy file found; looked at " + ", ".join(looked),
        "pass --policy FILE or create policy.yaml; `gatekeeper policy check` validates it",
    )


def launches(path: str | os.PathLike[str] | None, home: Path | None) -> list[Launch] | None:
    """Every server's ``Launch``, or None on any doubt (the full loader will explain)."""
    try:
        file, _ = find_policy(path, home)
        text = file.read_bytes().decode("utf-8-sig")
        return _from_text(text, Path(os.path.abspath(file)).parent)
    except Exception:  # PolicyError, OSError, YAML errors, anything: no early start
        return None


def _from_text(text: str, base: Path) -> list[Launch] | None:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(text, Loader=loader)  # a safe loader (C if built)
    if not isinstance(data, dict) or not isinstance(data.get("servers"), dict) or not data["servers"]:
        return None
    found = []
    for name, server in data["servers"].items():
        if isinstance(server, dict) and "url" in server and "command" not in server:
            continue  # reached over HTTP: nothing to start
        launch = _server(name, server, base)
        if launch is None:
            return None
        found.append(launch)
    return found


def _server(name: object, server: object, base: Path) -> Launch | None:
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        return None  # the log file is <name>.log: only names that are plain file names
    if not isinstance(server, dict):
        return None
    command, args, env = server.get("command"), server.get("args", []), server.get("env", {})
    cwd = server.get("cwd", ".")
    if not isinstance(command, str) or not command:
        return None
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return None
    if env is None or not isinstance(env, dict):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        return None
    if cwd is None:
        cwd = "."  # 'cwd:' left empty means the default, like leaving it out
    if not isinstance(cwd, str) or not cwd:
        return None
    if "/" in command or command.startswith("~"):
        command = _resolve_path(command, base)
    folder = Path(_resolve_path(cwd, base))
    return Launch(name, resolve(command, env, folder).path or command, tuple(args), dict(env), folder, command)


def _resolve_path(value: str, base: Path) -> str:
    """``scalars.resolve_path``: relative to the policy file's folder, ``~`` expanded."""
    return os.path.normpath(base / os.path.expanduser(value))

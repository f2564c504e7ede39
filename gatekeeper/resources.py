"""Find the files that ship beside the code: ``templates/`` and ``migrations/``.

In a wheel they sit inside the package (force-included by pyproject.toml); in a source
checkout or an editable install they sit at the top of the repo.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"Gatekeeper's {name}/ folder is missing from the installation; reinstall gatekeeper")


def migrations_dir() -> Path:
    return _find("migrations")


def templates_dir() -> Path:
    return _find("templates")

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gatekeeper.home import Home
from gatekeeper.store.store import Store
from tests.helpers import make_home, run_teardowns
from tests.pg_support import postgres_database, postgres_server

__all__ = ["postgres_database", "postgres_server"]  # fixtures, used by name


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never touch the user's real home or policy: each test gets its own."""
    monkeypatch.setenv("GATEKEEPER_HOME", str(tmp_path_factory.mktemp("unused-home") / "home"))
    monkeypatch.delenv("GATEKEEPER_POLICY", raising=False)
    monkeypatch.delenv("GATEKEEPER_DATABASE_URL", raising=False)


@pytest.fixture
def backend() -> str:
    """The store's backend for ``home``: SQLite; a module that runs on both overrides this fixture
    with ``params=tests.pg_support.BACKENDS``."""
    return "sqlite"


@pytest.fixture(autouse=True)
def _close_dropped_clients() -> Iterator[None]:
    """Close the clients a test made inline (``Page(site).login()``) instead of leaving their sockets
    to the garbage collector, where a ResourceWarning (an error here) would fail whichever test it ran in."""
    yield
    run_teardowns()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str, request: pytest.FixtureRequest) -> Home:
    if backend == "postgres":  # a fresh database at the head revision, named by the env variable
        monkeypatch.setenv("GATEKEEPER_DATABASE_URL", request.getfixturevalue("postgres_database").url)
    h = make_home(tmp_path / "home")
    monkeypatch.setenv("GATEKEEPER_HOME", str(h.path))
    return h


@pytest.fixture
def store(home: Home) -> Iterator[Store]:
    with Store(home.database, keys_dir=home.keys.folder) as s:
        yield s


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"

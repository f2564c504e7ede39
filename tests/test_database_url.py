"""``database_url``: where it comes from, what a bad one or an unreachable server says (never a
traceback, never the password), and ``gatekeeper init`` / ``db`` on a blank PostgreSQL database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gatekeeper.errors import InvalidInput
from gatekeeper.home import Home
from gatekeeper.store.queries import Reader
from gatekeeper.store.target import PostgresUrl, parse_database_url
from tests.pg_support import PostgresServer


def gk(*args: str, home: Path, url: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GATEKEEPER_HOME": str(home)}
    env.pop("GATEKEEPER_DATABASE_URL", None)
    if url is not None:
        env["GATEKEEPER_DATABASE_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "gatekeeper", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_the_url_comes_from_the_env_then_the_home_file_then_sqlite(tmp_path: Path, monkeypatch) -> None:
    home = Home(tmp_path)
    assert home.database == tmp_path / "gatekeeper.db"
    (tmp_path / "database_url").write_text("postgresql+psycopg://gk@db.example/team\n")
    assert home.database == PostgresUrl("postgresql+psycopg://gk@db.example/team")
    monkeypatch.setenv("GATEKEEPER_DATABASE_URL", "sqlite:////elsewhere/gk.db")
    assert home.database == Path("/elsewhere/gk.db")


@pytest.mark.parametrize(
    "value, words",
    [
        ("mysql://u@h/db", "is mysql://…, not a database URL"),
        ("/just/a/path.db", "a value without a scheme"),
        ("postgresql+psycopg://u@h:99999/db", "not a valid URL"),
        ("postgresql+psycopg://u@h", "names no database"),
        ("sqlite://", "needs a path"),
    ],
)
def test_a_bad_url_says_what_is_wrong_and_the_forms_it_takes(value: str, words: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_database_url(value, "$GATEKEEPER_DATABASE_URL")
    assert words in str(err.value) and str(err.value).startswith("$GATEKEEPER_DATABASE_URL")
    assert "postgresql+psycopg://" in str(err.value)  # the form it takes


def test_the_password_is_never_shown() -> None:
    url = PostgresUrl("postgresql+psycopg://gk:hunter2@db.example:5433/team")
    assert str(url) == "postgresql://gk@db.example:5433/team"
    assert "hunter2" not in repr(parse_database_url(url.url, "x")).replace(url.url, "")


def test_cli_bad_url_and_unreachable_server_are_clear_errors(tmp_path: Path) -> None:
    bad = gk("db", "status", home=tmp_path, url="mysql://root@localhost/gk")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "not a database URL Gatekeeper knows" in bad.stderr and "postgresql+psycopg://" in bad.stderr
    nowhere = f"postgresql+psycopg://gk:s3cret@/gk?host={tmp_path}/no-server&port=5999"
    down = gk("db", "status", home=tmp_path, url=nowhere)
    assert down.returncode != 0 and "Traceback" not in down.stderr
    assert "cannot connect to postgresql://gk@" in down.stderr and "GATEKEEPER_DATABASE_URL" in down.stderr
    assert "s3cret" not in down.stderr


def test_init_migrates_a_blank_postgres_database_and_audit_verifies_it(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    with postgres_server.admin() as conn:
        conn.execute("CREATE DATABASE gk_blank_init")
    url = postgres_server.cluster.url("gk_blank_init")
    try:
        status = gk("db", "status", home=tmp_path, url=url)
        assert status.returncode == 1 and "pending: 0001" in status.stdout, status.stderr
        init = gk("init", home=tmp_path / "home", url=url)
        assert init.returncode == 0, init.stderr
        assert "database   postgresql://gk@" in init.stdout
        assert not (tmp_path / "home" / "gatekeeper.db").exists()  # nothing SQLite beside it
        assert "up to date" in gk("db", "status", home=tmp_path / "home", url=url).stdout
        with Reader(PostgresUrl(url)) as reader:
            assert [e[2] for e in reader.events()] == ["init"]
            assert reader.proposals() == []
        verified = gk("audit", "verify", home=tmp_path / "home", url=url)  # the rest runs there too now
        assert verified.returncode == 0, verified.stderr
        assert verified.stdout.startswith("OK: 1 events"), verified.stdout
    finally:
        postgres_server.drop(PostgresUrl(url))

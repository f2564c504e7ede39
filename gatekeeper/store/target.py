"""Which database a process uses: a SQLite file (the embedded default) or a PostgreSQL server.

``database_url`` (``GATEKEEPER_DATABASE_URL``, or the file ``database_url`` in the home) takes
``postgresql+psycopg://user[:password]@host[:port]/dbname`` (a Unix socket: ``...@/dbname?host=/dir``)
or ``sqlite:///path``. Parsing needs the standard library only: a SQLite process never loads psycopg.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from gatekeeper.errors import InvalidInput

ENV_DATABASE_URL = "GATEKEEPER_DATABASE_URL"
POSTGRES_SCHEMES = ("postgresql+psycopg", "postgresql", "postgres")
FORMS = "postgresql+psycopg://USER[:PASSWORD]@HOST[:PORT]/DBNAME or sqlite:///PATH"


@dataclass(frozen=True)
class PostgresUrl:
    """A PostgreSQL database; ``str()`` never shows the password (it goes in errors and logs)."""

    url: str

    @property
    def sqlalchemy_url(self) -> str:
        """The URL with the driver SQLAlchemy must use (psycopg 3, never psycopg2)."""
        return "postgresql+psycopg://" + self.url.split("://", 1)[1]

    @property
    def conninfo(self) -> str:
        """The libpq URI psycopg connects with."""
        return "postgresql://" + self.url.split("://", 1)[1]

    def __str__(self) -> str:
        parts = urlsplit(self.url)
        host = parts.hostname or dict(parse_qsl(parts.query)).get("host", "local socket")
        user = f"{unquote(parts.username)}@" if parts.username else ""
        port = f":{parts.port}" if parts.port else ""
        return f"postgresql://{user}{host}{port}{parts.path}"


Database = Path | PostgresUrl
"""What ``Store``, ``Reader``, ``migrate`` and ``check_schema`` open."""


def parse_database_url(text: str, where: str) -> Database:
    """A ``database_url`` value, or a clear error naming ``where`` it came from and the forms it takes."""
    value = text.strip()
    scheme = value.split("://", 1)[0].lower() if "://" in value else ""
    if scheme == "sqlite":
        path = value.split("://", 1)[1].lstrip("/")
        if not path:
            raise InvalidInput(f"{where}: a sqlite URL needs a path", f"write it as {FORMS}")
        return Path("/" + path)
    if scheme not in POSTGRES_SCHEMES:
        shown = f"{scheme}://…" if scheme else "a value without a scheme"
        raise InvalidInput(f"{where} is {shown}, not a database URL Gatekeeper knows", f"write it as {FORMS}")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - urlsplit checks the port only when asked
    except ValueError as exc:
        raise InvalidInput(f"{where} is not a valid URL ({exc})", f"write it as {FORMS}") from None
    if not parts.path.strip("/"):
        raise InvalidInput(f"{where} names no database", f"add it after the host: {FORMS}")
    return PostgresUrl(value)


def as_url(db: Database) -> str:
    """``db`` as a ``database_url`` value (password included), to hand to another process."""
    return db.url if isinstance(db, PostgresUrl) else f"sqlite://{Path(db).absolute()}"

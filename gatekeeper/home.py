"""Where Gatekeeper keeps its state: one private folder with the database and the signing key.

``secret.key`` lives beside the database and never in it, so a copy of the database
alone cannot forge decisions. Everything in the home is private: folders 0700, files 0600.
``setup_home`` is the one way a home is made (``gatekeeper init`` and ``gatekeeper up`` both
call it), and ``PRIVATE_UMASK`` is set by the CLI for every process, so files made later
(logs, ``commit.lock``) are private too.
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gatekeeper.errors import GatekeeperError, HomeMissing
from gatekeeper.store.target import ENV_DATABASE_URL, Database, PostgresUrl, parse_database_url

if TYPE_CHECKING:  # cryptography loads only where keys are used, not in the proxy
    from gatekeeper.store.queries import Reader
    from gatekeeper.store.store import Store
    from gatekeeper.trust.keys import Keys

ENV_HOME = "GATEKEEPER_HOME"
DB_NAME = "gatekeeper.db"
KEY_NAME = "secret.key"
KEYS_DIR = "keys"  # gatekeeper.trust.keys.KEYS_DIR (kept equal by tests/test_team_runtime.py)
URL_NAME = "database_url"  # one line in the home: the database, when it is not gatekeeper.db
KEY_BYTES = 32
PRIVATE_UMASK = 0o077  # files 0600, folders 0700, whoever creates them
_user_umask: int | None = None  # the umask this process started with, before ``go_private``


def go_private() -> int:
    """Set ``PRIVATE_UMASK`` for this process; return the previous umask (to restore in-process)."""
    global _user_umask
    previous = os.umask(PRIVATE_UMASK)
    if _user_umask is None:
        _user_umask = previous
    return previous


def user_umask() -> int:
    """The umask the user started us with: downstream servers get it, not ours (their files are theirs)."""
    if _user_umask is not None:
        return _user_umask
    current = os.umask(0)
    os.umask(current)
    return current


def default_home() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("gatekeeper", appauthor=False))


def resolve_home(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``--home``, else ``$GATEKEEPER_HOME``, else the platform's user data folder."""
    if explicit:
        return Path(explicit).expanduser().absolute()
    env = os.environ.get(ENV_HOME)
    if env:
        return Path(env).expanduser().absolute()
    return default_home()


@dataclass(frozen=True)
class Home:
    path: Path

    @property
    def sqlite_file(self) -> Path:
        """``gatekeeper.db`` in the home: SQLite's own file, for what only a file has (creating it
        0600, its -wal and -shm, telling whether it exists). The store itself is ``database``."""
        return self.path / DB_NAME

    @property
    def db_path(self) -> Path:
        """``sqlite_file`` for SQLite-only code (tests, tools that open the file itself); a PostgreSQL
        ``database_url`` is refused here instead of quietly opening a SQLite file beside it. Open the
        store with ``store()`` / ``reader()`` (or ``database``), never with this."""
        if isinstance(self.database, PostgresUrl):
            raise GatekeeperError(
                f"this command opened the home's SQLite file, but database_url names PostgreSQL ({self.database})",
                f"report this as a bug; to use the home's SQLite database meanwhile, unset {ENV_DATABASE_URL} "
                f"(and remove {self.path / URL_NAME})",
            )
        return self.sqlite_file

    @property
    def database(self) -> Database:
        """The store: ``$GATEKEEPER_DATABASE_URL``, else the home's ``database_url`` file, else
        ``gatekeeper.db`` in the home (SQLite, the default). A bad URL is a clear error."""
        env = os.environ.get(ENV_DATABASE_URL, "").strip()
        if env:
            return parse_database_url(env, f"${ENV_DATABASE_URL}")
        url_file = self.path / URL_NAME
        if url_file.is_file():
            return parse_database_url(url_file.read_text(), str(url_file))
        return self.path / DB_NAME

    @property
    def key_path(self) -> Path:
        return self.path / KEY_NAME

    @property
    def keys_dir(self) -> Path:
        """The folder of the Ed25519 keys (``gatekeeper.trust.keys.KEYS_DIR``), named without loading
        cryptography: the proxy opens its store with it and never signs."""
        return self.path / KEYS_DIR

    @property
    def keys(self) -> Keys:
        """The Ed25519 keys (``gatekeeper.trust.keys``): a private one on the review side, public ones everywhere."""
        from gatekeeper.trust.keys import Keys

        return Keys(self.keys_dir)

    def has_database(self) -> bool:
        """Is there a store to open? SQLite: ``gatekeeper.db`` exists. PostgreSQL: a server's
        database is made by its administrator, so yes (opening it says if it is not there)."""
        return isinstance(self.database, PostgresUrl) or self.sqlite_file.is_file()

    def store(self, *, check: bool = True) -> Store:
        """The store for writing, wherever ``database`` says it is, with this home's keys."""
        from gatekeeper.store.store import Store

        return Store(self.database, check=check, keys_dir=self.keys_dir)

    def reader(self) -> Reader:
        """A read-only connection to the store, wherever ``database`` says it is."""
        from gatekeeper.store.queries import Reader

        return Reader(self.database)

    @property
    def lock_path(self) -> Path:
        return self.path / "commit.lock"

    @property
    def log_dir(self) -> Path:
        return self.path / "logs"

    def require(self) -> Home:
        """Fail with the command to run when the home or its database is missing."""
        if not self.path.is_dir():
            raise HomeMissing(
                f"no Gatekeeper home at {self.path}",
                "run `gatekeeper init` first, or pass --home / set GATEKEEPER_HOME",
            )
        if not self.has_database():
            raise HomeMissing(
                f"no database at {self.sqlite_file}",
                "run `gatekeeper init` (or `gatekeeper db upgrade`) to create it",
            )
        return self

    def create(self) -> bool:
        """Create the folder (0700); return True when it did not exist."""
        existed = self.path.is_dir()
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.path, 0o700)
        return not existed

    def ensure_db_file(self) -> bool:
        """Create an empty ``gatekeeper.db`` (0600) exclusively; return True when made now.

        SQLite gives ``-wal`` and ``-shm`` the mode of the database file, so creating it private
        before SQLite opens it keeps all three private whatever the umask.
        """
        try:
            os.close(os.open(self.sqlite_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        except FileExistsError:
            return False
        return True

    def tighten_db_files(self) -> list[str]:
        """Make an existing database (and its -wal, -shm) 0600; return the names that were looser.

        Homes first made by an older ``gatekeeper up`` have a world-readable database.
        """
        tightened = []
        for path in (self.sqlite_file, self.path / f"{DB_NAME}-wal", self.path / f"{DB_NAME}-shm"):
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o077:
                os.chmod(path, 0o600)
                tightened.append(path.name)
        return tightened

    def ensure_key(self) -> bool:
        """Create ``secret.key`` (0600, 32 random bytes) exclusively; return True when made now."""
        try:
            fd = os.open(self.key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            self.read_key()  # validates the existing one
            return False
        try:
            os.write(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        return True

    def read_key(self) -> bytes:
        try:
            fd = os.open(self.key_path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise HomeMissing(f"no signing key at {self.key_path}", "run `gatekeeper init` to create it") from None
        with os.fdopen(fd, "rb") as f:
            mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
            key = f.read()
        if mode & 0o077:
            raise GatekeeperError(
                f"{self.key_path} is readable by others (mode {mode:o})",
                f"run `chmod 600 {self.key_path}`",
            )
        if len(key) != KEY_BYTES:
            raise GatekeeperError(
                f"{self.key_path} holds {len(key)} bytes, expected {KEY_BYTES}",
                "restore it from a backup; a new key invalidates every recorded decision signature",
            )
        return key


@dataclass(frozen=True)
class SetupResult:
    """What ``setup_home`` had to create or apply (all False/empty: the home was ready)."""

    created_home: bool
    created_key: bool
    created_db: bool
    applied: tuple[str, ...]
    tightened: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return self.created_home or self.created_key or self.created_db or bool(self.applied or self.tightened)


def setup_home(home: Home, actor: str, by: str) -> SetupResult:
    """Make ``home`` ready, creating only what is missing, and record an ``init`` event if anything was.

    The one path for ``gatekeeper init`` and the first run of ``gatekeeper up``: folder and
    ``logs/`` 0700, ``secret.key`` and ``gatekeeper.db`` 0600 from their first byte, then migrated.
    """
    from gatekeeper.store import events as ev
    from gatekeeper.store import migrate

    created_home = home.create()
    home.log_dir.mkdir(mode=0o700, exist_ok=True)
    created_key = home.ensure_key()
    database = home.database
    sqlite = not isinstance(database, PostgresUrl)  # a server's database is made by its administrator
    created_db = sqlite and home.ensure_db_file()
    tightened = tuple(home.tighten_db_files()) if sqlite else ()
    before = migrate.upgrade(database)
    created_keys = ensure_keys(home)
    result = SetupResult(created_home, created_key or created_keys, created_db, tuple(before.pending), tightened)
    if result.changed:
        with home.store() as store:
            store.append_event(
                ev.INIT,
                actor,
                {
                    "home": str(home.path),
                    "by": by,
                    "created_home": created_home,
                    "created_key": created_key,
                    "created_db": created_db,
                    "applied": list(before.pending),
                    "tightened": list(tightened),
                },
            )
    return result


def ensure_keys(home: Home) -> bool:
    """Make the home's first Ed25519 key pair if it has no keys (``gatekeeper init``, or the review
    page's first start on an older home); True when made now.

    Decisions so far were HMAC-signed: their highest id is kept with the keys. Reviewer and passkey
    rows made before keys existed are signed as they are now (trusted on first use).
    """
    from gatekeeper.store import migrate
    from gatekeeper.store.signed_rows import sign_unsigned

    if not home.keys.ensure(hmac_until=migrate.max_decision_id(home.database)):
        return False
    with home.store() as store:
        signer = store.signer()
        with store.transaction() as tx:
            sign_unsigned(tx, signer)
    return True


def make_verify_only(home: Home, exported: str) -> list[str]:
    """Before ``setup_home``: a home for a committer's or an auditor's machine, holding only the
    review side's public keys (``keys export-public`` there). ``setup_home`` then makes no private
    key, so this machine can commit and verify but never approve, and the review page will not
    start here. Returns the key ids imported now."""
    from gatekeeper.trust.keys import parse_public

    parse_public(exported)  # a bad text is refused before the home is made
    keys = home.keys
    if keys.has_private():
        raise GatekeeperError(
            f"{home.path} already holds a private signing key ({keys.private_path}): it is a review side",
            "make the verify-only home elsewhere (--home); `gatekeeper keys import-public` adds public keys here",
        )
    home.create()
    return keys.import_public(exported)

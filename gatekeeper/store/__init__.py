"""The SQLite store: the write door (``store.Store``), the read side (``queries.Reader``), the chain.

Import from the submodules. Only ``schema`` (the SQLModel tables), ``engine`` and ``migrate``
load SQLAlchemy or Alembic, and only migrating (``init``, ``db``, the first ``up``) and tests
import them: the store writes and reads with plain sqlite3, so the proxy and the ``audit``
commands start without them.
"""

"""The store: the write door (``store.Store``), the read side (``queries.Reader``), the chain.

SQLite by default, PostgreSQL for a team (``target``: ``database_url``); ``backends`` owns every
difference, and the domain SQL is written once. Import from the submodules. Only ``schema`` (the
SQLModel tables), ``engine`` and ``migrate`` load SQLAlchemy or Alembic, and only migrating
(``init``, ``db``, the first ``up``) and tests import them; only ``postgres`` loads psycopg. On
SQLite the store writes and reads with plain sqlite3, so the proxy and the ``audit`` commands start
without any of them.
"""

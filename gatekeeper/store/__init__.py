"""The SQLite store: the write door (``store.Store``), the read side (``queries.Reader``), the chain.

Import from the submodules: ``queries`` and ``chain`` use only the standard library, so the
read-only ``audit`` commands start without loading SQLAlchemy.
"""

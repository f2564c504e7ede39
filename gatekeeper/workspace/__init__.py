"""A workspace on disk, read and opened beneath its root without ever following a link: the
folder walk (``beneath``), the one "what is at this name" probe (``probe``), a read-only reader
(``reading``) and the Linux calls they need (``syscalls``). Used by the proxy, the review page,
revert and the committer; fault injection is the committer's and stays out of here."""

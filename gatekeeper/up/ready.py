"""A child tells the process that started it that it is running: one line down an inherited pipe.

``gatekeeper up`` must tell a child that could not start (its port taken, another committer on
the home) from one that crashed after it was running: the first ends ``up`` with its reason, only
the second is restarted. How long a start takes says nothing on a loaded machine, so the child
says it: the review page once it listens, the committer once it holds its lock and watches. The
parent hands the pipe's write end down as ``GATEKEEPER_READY_FD``; without it ``notify`` does nothing.
"""

from __future__ import annotations

import os
import stat

ENV_READY_FD = "GATEKEEPER_READY_FD"


def notify() -> None:
    """Say "running" to the parent, once; a no-op when no parent asked (or it went away)."""
    fd = os.environ.pop(ENV_READY_FD, None)  # popped: what this process starts must not inherit it
    if fd is None or not fd.isdigit():
        return
    try:
        if stat.S_ISFIFO(os.fstat(int(fd)).st_mode):  # a stray variable naming some other file: leave it be
            os.write(int(fd), b"ready\n")
            os.close(int(fd))
    except OSError:
        pass  # a parent that went away is no reason to stop


class ReadyPipe:
    """The parent's end: ``fd`` goes to the child (``pass_fds`` and ``ENV_READY_FD``), ``said()``
    tells whether the child has said it is running."""

    def __init__(self) -> None:
        self._read, self.fd = os.pipe()
        os.set_blocking(self._read, False)
        self.ready = False

    def handed_over(self) -> None:
        """The child has its copy of the write end: close ours, so its exit reads as end of file."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def said(self) -> bool:
        if self.ready or self._read < 0:
            return self.ready
        try:
            data = os.read(self._read, 64)
        except BlockingIOError:
            return False
        self.ready = data.startswith(b"ready")
        self.close()  # said, or closed without a word (the child is ending): nothing more will come
        return self.ready

    def close(self) -> None:
        self.handed_over()
        if self._read >= 0:
            os.close(self._read)
            self._read = -1

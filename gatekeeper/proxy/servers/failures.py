"""Why a downstream server could not start, or stopped, in words for the host and the audit log."""

from __future__ import annotations

from gatekeeper.proxy.servers.url.addresses import AddressRefused


def innermost(exc: BaseException) -> BaseException:
    """The one exception a chain of single-member groups wraps (a task group's failure)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException, is_remote: bool) -> str:
    """What went wrong, for the server's ``error`` (messages to the host and ``server_failed`` events)."""
    exc = innermost(exc)
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e, is_remote) for e in exc.exceptions)
    if isinstance(exc, AddressRefused):
        return str(exc)
    if is_remote:  # proxy/servers/url/connection.py (httpx2, the SDK's HTTP client) loads only for a url server
        from gatekeeper.proxy.servers.url import connection as remote

        if (http := remote.described(exc)) is not None:
            return http
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

"""The proxy silences exactly the warning it provokes on purpose (proxy/run.py), not all of them."""

from __future__ import annotations

import warnings

from mcp.shared.exceptions import MCPDeprecationWarning

from gatekeeper.proxy.run import expected_warnings

LOGGING = "The logging capability is deprecated as of 2026-07-28 (SEP-2577)."
ROOTS = "The roots capability is deprecated as of 2026-07-28 (SEP-2577)."


def _warn(message: str, category: type[Warning], module: str) -> None:
    """A warning as if raised by ``module``, the way the SDK's ``@deprecated`` attributes it to its caller."""
    warnings.warn_explicit(message, category, f"{module.replace('.', '/')}.py", 1, module=module)


def test_only_the_logging_deprecation_from_the_proxy_server_is_silenced() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected_warnings()
        _warn(LOGGING, MCPDeprecationWarning, "gatekeeper.proxy.server")  # the one meant: forwarding logs
        _warn(LOGGING, MCPDeprecationWarning, "gatekeeper.proxy.sdkhost")  # and building the SDK server
        _warn(ROOTS, MCPDeprecationWarning, "gatekeeper.proxy.server")  # another deprecated API
        _warn(LOGGING, MCPDeprecationWarning, "gatekeeper.proxy.serverless")  # another module
        _warn(LOGGING, MCPDeprecationWarning, "gatekeeper.review.app")
        _warn(LOGGING, DeprecationWarning, "gatekeeper.proxy.server")  # another category
        _warn("resource leaked", ResourceWarning, "gatekeeper.proxy.server")
    assert [(type(w.message), str(w.message), w.filename) for w in caught] == [
        (MCPDeprecationWarning, ROOTS, "gatekeeper/proxy/server.py"),
        (MCPDeprecationWarning, LOGGING, "gatekeeper/proxy/serverless.py"),
        (MCPDeprecationWarning, LOGGING, "gatekeeper/review/app.py"),
        (DeprecationWarning, LOGGING, "gatekeeper/proxy/server.py"),
        (ResourceWarning, "resource leaked", "gatekeeper/proxy/server.py"),
    ]

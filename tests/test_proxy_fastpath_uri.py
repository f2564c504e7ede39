"""A resource URI goes to the child as the host wrote it, on the fast path as on the regular one.

The fast path once normalised a ``resources/read`` URI through the SDK's ``ReadResourceRequestParams``
(importing the SDK on the proxy's start-up path, issue 12). In SDK 2.3 that field is a plain ``str``:
no URL normalisation, so the URI as written *is* what the SDK path forwarded. The property test holds
the SDK to that over generated URIs (should it ever normalise again, it fails and the fast path must
follow); the end-to-end test proves the proxy forwards unusual URIs byte for byte on the fast path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.provisional import urls
from mcp_types import ReadResourceRequestParams

from gatekeeper.home import Home
from tests.test_proxy_fastpath import answer_line, child_lines, raw_host

UNUSUAL = [
    "RAW://Note",  # an upper-case scheme and host: a URL parser would lower them
    "raw://note/a/../b",  # dot segments: a URL parser would remove them
    "raw://n o%7e",  # a space and an escaped tilde
    "raw://\u00e9t\u00e9/\u2603",  # non-ASCII: a URL parser would percent-encode it
    "raw:note",  # no authority
    "http://Example.COM",  # a special scheme: a URL parser would add a "/" path
    "relative/path",  # not a URL at all
]

uris = st.one_of(
    urls(),
    st.text(max_size=40),
    st.builds(
        lambda scheme, rest: f"{scheme}://{rest}",
        st.from_regex(r"[A-Za-z][A-Za-z0-9+.-]{0,6}", fullmatch=True),
        st.text(max_size=30),
    ),
)


@settings(max_examples=300, deadline=None)
@given(uris)
def test_the_sdk_types_a_resource_uri_as_the_string_the_host_wrote(uri: str) -> None:
    assert str(ReadResourceRequestParams(uri=uri).uri) == uri
    wire = json.dumps({"uri": uri})
    assert ReadResourceRequestParams.model_validate_json(wire).uri == uri


@pytest.mark.timeout(120)
def test_unusual_uris_reach_the_child_as_written_on_the_fast_path(tmp_path: Path, home: Home) -> None:
    with raw_host(tmp_path, home, "raw") as proxy:
        for rid, uri in enumerate(UNUSUAL):
            proxy.send({"jsonrpc": "2.0", "id": rid, "method": "resources/read", "params": {"uri": uri}})
            assert "result" in json.loads(answer_line(proxy, rid))
    reads = [m for m in child_lines(tmp_path, "raw") if m.get("method") == "resources/read"]
    assert [m["params"] for m in reads] == [{"uri": uri} for uri in UNUSUAL]
    assert all(m["id"].startswith("gatekeeper-fast-") for m in reads)  # the fast path took each

"""The proxy's refusal events cannot flood the append-only log: bounded fields, repeats counted.

A host (or whatever drives it) can send bad lines, call unknown tools and make proposals that are
refused as fast as it likes, with fields as large as a 64 MiB line allows. Each test drives the
real proxy as a subprocess and then reads the real database it wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from gatekeeper.home import Home
from tests.proxy_support import PY, REPO, rows, write_policy
from tests.test_proxy_wire import INIT, RawProxy


def _started(tmp_path: Path, home: Home) -> RawProxy:
    proxy = RawProxy(write_policy(tmp_path), home.path)
    proxy.send(INIT)
    assert "result" in proxy.wait_for(1)
    proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return proxy


def _call(rid: Any, name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": {}}}


def _answers(proxy: RawProxy, count: int, match: Any, timeout: float = 60) -> list[dict[str, Any]]:
    """Poll stdout until ``count`` messages satisfy ``match``."""
    deadline = time.monotonic() + timeout
    while True:
        found = [m for m in (json.loads(line) for line in list(proxy.lines)) if match(m)]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def _end(proxy: RawProxy, *, signum: int | None = None) -> int:
    """End the proxy as a host does: stdin EOF, or a signal while stdin stays open."""
    assert proxy.proc.stdin is not None
    if signum is None:
        proxy.proc.stdin.close()
    else:
        proxy.proc.send_signal(signum)
    try:
        return proxy.proc.wait(timeout=20)
    finally:
        proxy.close()


def _events(home: Home) -> list[tuple[int, str, dict[str, Any]]]:
    found = rows(home.db_path, "SELECT seq, kind, payload FROM audit_event ORDER BY seq")
    return [(seq, kind, json.loads(payload)) for seq, kind, payload in found]


def _counted(home: Home, kind: str) -> tuple[list[tuple[int, dict[str, Any]]], list[dict[str, Any]]]:
    """The refusals of ``kind`` stored whole, and the ``refusal_repeated`` events that count them."""
    found = _events(home)
    whole = [(seq, payload) for seq, k, payload in found if k == kind]
    repeats = [payload for _seq, k, payload in found if k == "refusal_repeated" and payload["kind"] == kind]
    return whole, repeats


def _assert_chain_verifies(home: Home) -> None:
    done = subprocess.run(
        [PY, "-m", "gatekeeper", "audit", "verify"],
        env={"GATEKEEPER_HOME": str(home.path), "PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_huge_unknown_tool_name_is_stored_cut_with_its_length(tmp_path: Path, home: Home) -> None:
    name = "x" * (1024 * 1024)
    proxy = _started(tmp_path, home)
    try:
        proxy.send(_call("huge", name))
        result = proxy.wait_for("huge")["result"]
        assert result["isError"] is True
        assert "not available through Gatekeeper" in result["content"][0]["text"]
        assert len(result["content"][0]["text"]) < 1000  # the answer does not echo the megabyte either
    finally:
        assert _end(proxy) == 0
    ((_seq, denied),) = [(seq, payload) for seq, kind, payload in _events(home) if kind == "tool_denied"]
    assert denied["tool"] == "x" * 200 + f"…[cut: {len(name)} chars]"
    ((stored,),) = rows(home.db_path, "SELECT sum(length(payload)) FROM audit_event")
    assert stored < 4096  # the whole log, startup events included: the name was not kept
    _assert_chain_verifies(home)


def test_identical_unparseable_lines_are_answered_each_but_stored_once(tmp_path: Path, home: Home) -> None:
    proxy = _started(tmp_path, home)
    try:
        for _ in range(200):
            proxy.send(b"not json")
        errors = _answers(proxy, 200, lambda m: m.get("id", "") is None and "error" in m)
        assert len(errors) == 200
        assert all(e["error"]["code"] == -32700 for e in errors)
        assert proxy.proc.poll() is None
    finally:
        assert _end(proxy) == 0  # stdin EOF: a clean stop writes the counters
    whole, repeats = _counted(home, "request_refused")
    ((first_seq, first),) = whole
    assert first == {"reason": "not_json", "size": len(b"not json"), "code": -32700}
    assert repeats and {r["first_seq"] for r in repeats} == {first_seq}
    assert sum(r["repeats"] for r in repeats) == 199
    _assert_chain_verifies(home)


def test_identical_denied_calls_are_counted_and_flushed_on_sigterm(tmp_path: Path, home: Home) -> None:
    proxy = _started(tmp_path, home)
    try:
        for i in range(50):
            proxy.send(_call(f"denied-{i}", "delete_note"))
        answers = _answers(proxy, 50, lambda m: str(m.get("id")).startswith("denied-"))
        assert len(answers) == 50
        assert all(a["result"]["isError"] is True for a in answers)
    finally:
        # The host's stdin stays open: the signal path must write the counters before it exits.
        assert _end(proxy, signum=signal.SIGTERM) == 128 + signal.SIGTERM
    whole, repeats = _counted(home, "tool_denied")
    ((first_seq, first),) = whole
    assert first == {"tool": "delete_note", "why": "not allowed or proposed by the policy"}
    assert {r["first_seq"] for r in repeats} == {first_seq}
    assert sum(r["repeats"] for r in repeats) == 49
    _assert_chain_verifies(home)


def test_identical_refused_proposals_are_bounded_and_counted(tmp_path: Path, home: Home) -> None:
    path = "../" + "a" * 5000  # the refusal's reason quotes the destination
    proxy = _started(tmp_path, home)
    try:
        for i in range(30):
            proxy.send(
                {
                    "jsonrpc": "2.0",
                    "id": f"p-{i}",
                    "method": "tools/call",
                    "params": {"name": "write_note", "arguments": {"path": path, "body": "x"}},
                }
            )
        answers = _answers(proxy, 30, lambda m: str(m.get("id")).startswith("p-"))
        assert len(answers) == 30
        assert all(a["result"]["content"][0]["text"].startswith("Not proposed:") for a in answers)
    finally:
        assert _end(proxy) == 0
    whole, repeats = _counted(home, "proposal_refused")
    ((first_seq, first),) = whole
    assert "…[cut: " in first["why"] and len(first["why"]) < 300
    assert {r["first_seq"] for r in repeats} == {first_seq}
    assert sum(r["repeats"] for r in repeats) == 29
    assert rows(home.db_path, "SELECT count(*) FROM proposal") == [(0,)]
    _assert_chain_verifies(home)

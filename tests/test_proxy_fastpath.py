"""The fast path (proxy/fast/path.py): allowed calls forwarded as raw JSON-RPC, observed from both ends.

A raw host (bytes on the proxy's stdin, lines from its stdout) in front of tests/peers/raw_server.py,
a real server that logs every line it receives and answers in odd bytes. What reached the child
(ids, names, cancellations) is read from its log; what reached the host from the proxy's stdout.
The SDK client's ids toward a child are integers, so an id ``gatekeeper-fast-N`` at the child
shows the call took the fast path, and the child's odd bytes at the host show nothing
re-serialised them.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gatekeeper.home import Home
from tests.helpers import budget
from tests.proxy_support import REPO, proxy_params, run_on_files
from tests.test_proxy_wire import RawProxy

pytestmark = pytest.mark.timeout(120)
SERVER = """
  {name}:
    command: {py}
    args: ["-m", "tests.peers.raw_server"]
    cwd: {repo}
    workspace: {workspace}
    env: {{PYTHONPATH: "{repo}", RAW_LOG: "{log}"{extra}}}
    tools:
      echo_line: allow
      odd: allow
      slow: allow
      progress: allow
      die: allow
      ask: allow
      put:
        propose:
          path: {{arg: path}}
          content: {{arg: content}}
"""


def raw_policy(tmp: Path, *names: str, extra: str = "") -> Path:
    workspace = tmp / "workspace"
    workspace.mkdir(exist_ok=True)
    text = "version: 1\nservers:\n"
    for name in names:
        log = tmp / f"{name}.log"
        text += SERVER.format(name=name, py=sys.executable, repo=REPO, workspace=workspace, log=log, extra=extra)
    policy = tmp / "policy.yaml"
    policy.write_text(textwrap.dedent(text))
    return policy


def call(rid: Any, name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def child_lines(tmp: Path, name: str) -> list[dict[str, Any]]:
    path = tmp / f"{name}.log"
    # Only whole lines: the child may be writing the last one while we read (a flake under load).
    whole = path.read_text().split("\n")[:-1] if path.exists() else []
    return [json.loads(line) for line in whole if line]


def child_calls(tmp: Path, name: str) -> list[dict[str, Any]]:
    return [m for m in child_lines(tmp, name) if m.get("method") == "tools/call"]


def wait_until(check: Any, what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def answer_line(proxy: RawProxy, rid: Any) -> bytes:
    """The raw stdout line that answers ``rid`` (exactly one must)."""

    def found() -> list[bytes]:
        return [line for line in list(proxy.lines) if _answers(line, rid)]

    lines = wait_until(found, f"an answer to {rid!r}")
    assert len(lines) == 1, lines
    return lines[0]


def _answers(line: bytes, rid: Any) -> bool:
    message = json.loads(line)
    return message.get("id") == rid and type(message.get("id")) is type(rid) and "method" not in message


@contextmanager
def raw_host(tmp: Path, home: Home, *names: str, extra: str = "") -> Iterator[RawProxy]:
    proxy = RawProxy(raw_policy(tmp, *names, extra=extra), home.path)
    try:
        proxy.send(
            {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
        )
        assert "result" in proxy.wait_for("init")
        proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        proxy.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        assert "result" in proxy.wait_for("list"), proxy.lines
        yield proxy
        proxy.assert_stdout_is_jsonrpc()
    finally:
        proxy.close()


def direct_answer(tmp: Path, request: dict[str, Any]) -> bytes:
    """The raw server's own answer to ``request``, with no proxy in between."""
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    data = "".join(json.dumps(m) + "\n" for m in (init, request)).encode()
    done = subprocess.run(
        [sys.executable, "-m", "tests.peers.raw_server"],
        input=data,
        capture_output=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "RAW_LOG": str(tmp / "direct.log")},
        timeout=30,
        check=True,
    )
    return done.stdout.splitlines()[1]


def test_the_answer_is_the_childs_bytes_and_the_child_sees_our_id(tmp_path: Path, home: Home) -> None:
    request = call(7, "odd")
    direct = direct_answer(tmp_path, request)
    with raw_host(tmp_path, home, "raw") as proxy:
        proxy.send(request)
        assert answer_line(proxy, 7).rstrip(b"\n") == direct  # spacing, key order, escapes, big int
        proxy.send(call("echo", "echo_line", {"x": [1, 2.5, None, "é"]}, progressToken="t1", custom="kept"))
        seen = json.loads(json.loads(answer_line(proxy, "echo"))["result"]["content"][0]["text"])
    assert isinstance(seen["id"], str) and seen["id"].startswith("gatekeeper-fast-")
    assert seen["params"]["arguments"] == {"x": [1, 2.5, None, "é"]}
    assert seen["params"]["_meta"]["custom"] == "kept"
    assert seen["params"]["_meta"]["progressToken"] == seen["id"]  # the host's token is ours toward the child
    assert len(child_calls(tmp_path, "raw")) == 2
    assert all(c["id"].startswith("gatekeeper-fast-") for c in child_calls(tmp_path, "raw"))


def test_host_ids_that_look_like_ours_and_ids_on_two_children(tmp_path: Path, home: Home) -> None:
    with raw_host(tmp_path, home, "a", "b") as proxy:
        proxy.send(call("gatekeeper-fast-1", "a__slow"))  # the first fast call: ours is gatekeeper-fast-0
        wait_until(lambda: child_calls(tmp_path, "a"), "the slow call to reach a")
        proxy.send(call("gatekeeper-fast-0", "a__echo_line"))
        proxy.send(call(5, "b__echo_line"))
        proxy.send(call("5", "a__echo_line"))
        at_a = json.loads(json.loads(answer_line(proxy, "gatekeeper-fast-0"))["result"]["content"][0]["text"])
        at_b = json.loads(json.loads(answer_line(proxy, 5))["result"]["content"][0]["text"])
        at_a2 = json.loads(json.loads(answer_line(proxy, "5"))["result"]["content"][0]["text"])
        assert at_a["params"]["name"] == "echo_line" and at_b["params"]["name"] == "echo_line"  # prefix dropped
        ids = [c["id"] for c in child_calls(tmp_path, "a") + child_calls(tmp_path, "b")]
        assert len(set(ids)) == len(ids) == 4 and all(i.startswith("gatekeeper-fast-") for i in ids)
        assert at_a["id"] != "gatekeeper-fast-0" and at_a2["id"] != at_b["id"]
        proxy.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "gatekeeper-fast-1"}}
        )

        def cancelled() -> list[dict[str, Any]]:
            return [m for m in child_lines(tmp_path, "a") if m.get("method") == "notifications/cancelled"]

        notice = wait_until(cancelled, "the cancellation to reach the child")
        slow_id = child_calls(tmp_path, "a")[0]["id"]
        assert notice[0]["params"]["requestId"] == slow_id != "gatekeeper-fast-1"
        proxy.send(call("after", "a__echo_line"))
        answer_line(proxy, "after")
    assert not [line for line in proxy.lines if _answers(line, "gatekeeper-fast-1")]  # cancelled: no answer


def test_progress_and_logs_of_a_fast_call_reach_the_host(tmp_path: Path, home: Home) -> None:
    with raw_host(tmp_path, home, "raw") as proxy:
        proxy.send(call(1, "progress", progressToken="tok"))
        done = json.loads(answer_line(proxy, 1))
        assert done["result"]["content"][0]["text"] == "done"
        messages = [json.loads(line) for line in proxy.lines]
        progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
        assert [(p["progressToken"], p["progress"]) for p in progress] == [("tok", 1), ("tok", 2)]
        assert messages.index(next(m for m in messages if m.get("id") == 1)) > max(
            i for i, m in enumerate(messages) if m.get("method") == "notifications/progress"
        )
        wait_until(
            lambda: [m for m in map(json.loads, proxy.lines) if m.get("method") == "notifications/message"],
            "the child's log line",
        )
    assert child_calls(tmp_path, "raw")[0]["id"].startswith("gatekeeper-fast-")


def test_a_child_dying_answers_every_pending_fast_call(tmp_path: Path, home: Home) -> None:
    with raw_host(tmp_path, home, "raw") as proxy:
        for rid in (1, 2, 3):
            proxy.send(call(rid, "slow"))
        wait_until(lambda: len(child_calls(tmp_path, "raw")) == 3, "three slow calls at the child")
        proxy.send(call(4, "die"))
        for rid in (1, 2, 3, 4):
            result = json.loads(answer_line(proxy, rid))["result"]
            assert result["isError"] is True
            assert "downstream server 'raw' stopped during the call" in result["content"][0]["text"]
        proxy.send(call(5, "echo_line"))  # started again on demand
        assert "result" in json.loads(answer_line(proxy, 5))
    starts = [m for m in child_lines(tmp_path, "raw") if m.get("method") == "initialize"]
    assert len(starts) == 2


def test_proposed_denied_and_own_tools_never_reach_the_child(tmp_path: Path, home: Home) -> None:
    with raw_host(tmp_path, home, "raw") as proxy:
        proxy.send(call(1, "put", {"path": "a.txt", "content": "x"}))
        proposed = json.loads(answer_line(proxy, 1))["result"]
        assert "proposal" in json.dumps(proposed).lower()
        proxy.send(call(2, "secret"))
        assert json.loads(answer_line(proxy, 2))["result"]["isError"] is True
        proxy.send(call(3, "gatekeeper_proposal_status", {"proposal_id": "nope"}))
        answer_line(proxy, 3)
        proxy.send(call(4, "echo_line"))
        answer_line(proxy, 4)
    assert [c["params"]["name"] for c in child_calls(tmp_path, "raw")] == ["echo_line"]


def test_a_tool_whose_definition_changed_never_reaches_the_child(tmp_path: Path, home: Home) -> None:
    with raw_host(tmp_path, home, "raw") as proxy:  # the first listing pins every definition
        proxy.send(call(1, "echo_line"))
        answer_line(proxy, 1)
    with raw_host(tmp_path, home, "raw", extra=', RAW_VARIANT: " (changed)"') as proxy:
        proxy.send(call(2, "echo_line"))
        withheld = json.loads(answer_line(proxy, 2))["result"]
        assert withheld["isError"] is True and "--accept-changes" in withheld["content"][0]["text"]
        proxy.send(call(3, "odd"))  # also changed: withheld too
        assert json.loads(answer_line(proxy, 3))["result"]["isError"] is True
    assert [c["id"] for c in child_calls(tmp_path, "raw")] == ["gatekeeper-fast-0"]  # only the first session's


def test_stdout_stays_jsonrpc_with_fast_and_sdk_traffic_interleaved(tmp_path: Path, home: Home) -> None:
    with raw_host(tmp_path, home, "raw") as proxy:
        batch = b""
        for i in range(300):
            batch += json.dumps(call(f"c{i}", "echo_line", {"i": i, "pad": "x" * (i * 37 % 5000)})).encode() + b"\n"
            if i % 2 == 0:  # 150 on the SDK path: more than HostIn queues before pausing the pipe
                batch += json.dumps({"jsonrpc": "2.0", "id": f"l{i}", "method": "tools/list"}).encode() + b"\n"
            if i % 7 == 0:
                batch += json.dumps(call(f"p{i}", "progress", progressToken=f"t{i}")).encode() + b"\n"
        assert proxy.proc.stdin is not None
        proxy.proc.stdin.write(batch)
        proxy.proc.stdin.flush()
        expected = (
            {f"c{i}" for i in range(300)} | {f"l{i}" for i in range(0, 300, 2)} | {f"p{i}" for i in range(0, 300, 7)}
        )

        def answered() -> bool:
            ids = [json.loads(line).get("id") for line in list(proxy.lines)]
            return expected <= set(ids)

        wait_until(answered, "every call answered", timeout=60)
        ids = [m.get("id") for m in map(json.loads, proxy.lines) if "method" not in m]
        assert sorted(i for i in ids if i in expected) == sorted(expected)  # each exactly once
    assert all(c["id"].startswith("gatekeeper-fast-") for c in child_calls(tmp_path, "raw"))


def test_resources_read_and_prompts_get_go_through_raw(tmp_path: Path, home: Home) -> None:
    read = {"jsonrpc": "2.0", "id": 8, "method": "resources/read", "params": {"uri": "raw://note"}}
    direct = direct_answer(tmp_path, read)
    with raw_host(tmp_path, home, "raw") as proxy:
        proxy.send(read)
        assert answer_line(proxy, 8).rstrip(b"\n") == direct
        get = {"method": "prompts/get", "params": {"name": "hello", "arguments": {"who": "x"}, "_meta": {"k": 1}}}
        proxy.send({"jsonrpc": "2.0", "id": 9, **get})
        seen = json.loads(json.loads(answer_line(proxy, 9))["result"]["messages"][0]["content"]["text"])
        assert seen["params"] == {"name": "hello", "arguments": {"who": "x"}}  # what Passthrough sends
        proxy.send({"jsonrpc": "2.0", "id": 10, "method": "resources/read", "params": {"uri": "raw://die"}})
        error = json.loads(answer_line(proxy, 10))["error"]
        assert error["message"] == "downstream server 'raw' stopped during the call: Connection closed"
    received = [m for m in child_lines(tmp_path, "raw") if m.get("method") in ("resources/read", "prompts/get")]
    assert [m["method"] for m in received] == ["resources/read", "prompts/get", "resources/read"]
    assert all(m["id"].startswith("gatekeeper-fast-") for m in received)


def test_prompts_of_two_servers_lose_their_prefix(tmp_path: Path, home: Home) -> None:
    with raw_host(tmp_path, home, "a", "b") as proxy:
        proxy.send({"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": "b__hello"}})
        seen = json.loads(json.loads(answer_line(proxy, 1))["result"]["messages"][0]["content"]["text"])
        assert seen["params"] == {"name": "hello"} and seen["id"].startswith("gatekeeper-fast-")
        proxy.send({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "raw://note"}})
        assert "result" in json.loads(answer_line(proxy, 2))  # owner unknown (never listed): today's path
    assert [m["method"] for m in child_lines(tmp_path, "b") if m.get("method") == "prompts/get"] == ["prompts/get"]
    reads = [m for m in child_lines(tmp_path, "a") if m.get("method") == "resources/read"]
    assert reads and isinstance(reads[0]["id"], int)  # the SDK client's id: not the fast path


def test_a_host_that_stops_reading_does_not_stall_the_proxy(tmp_path: Path, home: Home) -> None:
    """Answers pile up unread (far more than a pipe holds): the proxy's loop must stay free, so
    it still ends its child and exits on SIGTERM within a host's budget."""
    params = proxy_params(raw_policy(tmp_path, "raw"), home.path)
    proc = subprocess.Popen(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**params.env, "PATH": "/usr/bin:/bin"},  # type: ignore[dict-item]
        cwd=params.cwd,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        for message in (
            {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": "list", "method": "tools/list"},
        ):
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
            if "id" in message:
                assert json.loads(proc.stdout.readline())["id"] == message["id"]
        child = wait_until(lambda: _child_pid(proc.pid), "the child process")
        pad = "x" * 20000
        for i in range(300):  # ~6 MB of answers; from here on nothing reads the proxy's stdout
            proc.stdin.write(json.dumps(call(i, "echo_line", {"pad": pad})).encode() + b"\n")
        proc.stdin.flush()
        wait_until(lambda: len(child_calls(tmp_path, "raw")) >= 100, "calls to reach the child")
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        assert time.monotonic() - start < budget(2.0)
        wait_until(lambda: not _alive(child), "the child to be ended", timeout=5)
    finally:
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            with contextlib.suppress(BrokenPipeError):  # bytes the dead proxy never read
                pipe.close()


def _child_pid(pid: int) -> int | None:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    text = children.read_text().split() if children.exists() else []
    return int(text[0]) if text else None


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_files_instead_of_pipes_still_work(tmp_path: Path, home: Home) -> None:
    """stdin and stdout redirected to regular files (no event-loop pipe for them): the proxy reads
    in a thread and writes blocking, as before, and a malformed line is still answered."""
    params = proxy_params(raw_policy(tmp_path, "raw"), home.path)
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    sent = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}).encode() + b"\n{oops\n"
    lines = run_on_files(params, sent, tmp_path)
    # Answers to different requests may come in either order (JSON-RPC promises none): the refusal
    # is written at once, the initialize answer after the SDK's own round trip.
    assert len(lines) == 2, lines
    (answer,) = [m for m in lines if m.get("id") == 1]
    (refusal,) = [m for m in lines if "error" in m]
    assert answer["result"]["serverInfo"]["name"] == "gatekeeper"
    assert refusal["error"]["code"] == -32700 and "not valid JSON" in refusal["error"]["message"]


MODERN = "2026-07-28"


def envelope(**extra: Any) -> dict[str, Any]:
    """The 2026-07-28 per-request ``_meta`` envelope, plus ``extra`` keys."""
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
        **extra,
    }


@contextmanager
def modern_host(tmp: Path, home: Home, *names: str) -> Iterator[tuple[RawProxy, dict[str, Any]]]:
    """A raw host on 2026-07-28 (no handshake: its first enveloped request locks the era); also
    yields the serverInfo stamp the SDK server put on its ``tools/list`` answer."""
    proxy = RawProxy(raw_policy(tmp, *names), home.path)
    try:
        proxy.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": {"_meta": envelope()}})
        listed = proxy.wait_for("list")
        assert listed["result"]["resultType"] == "complete", listed
        yield proxy, listed["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
        proxy.assert_stdout_is_jsonrpc()
    finally:
        proxy.close()


def test_a_2026_host_is_answered_raw_with_our_stamp(tmp_path: Path, home: Home) -> None:
    direct = json.loads(direct_answer(tmp_path, call(7, "odd")))
    with modern_host(tmp_path, home, "raw") as (proxy, stamp):
        proxy.send(call(7, "odd", **envelope(progressToken="p")))
        answer = json.loads(answer_line(proxy, 7))
        proxy.send(call(8, "echo_line", {"x": 1}, **envelope(custom="kept")))
        seen = json.loads(json.loads(answer_line(proxy, 8))["result"]["content"][0]["text"])
    expected = direct["result"]
    expected["_meta"]["io.modelcontextprotocol/serverInfo"] = stamp  # ours, as the SDK path stamps
    expected["resultType"] = "complete"  # a 2026 result must say it; the 2025 child did not
    assert answer["result"] == expected and answer["result"]["_meta"]["big"] == 12345678901234567890123
    assert stamp["name"] == "gatekeeper"
    assert seen["id"].startswith("gatekeeper-fast-")
    assert seen["params"]["_meta"] == {"custom": "kept"}  # the host's envelope never reaches a 2025 child
    assert all(c["id"].startswith("gatekeeper-fast-") for c in child_calls(tmp_path, "raw"))


def test_a_2026_hosts_logs_follow_each_requests_opt_in(tmp_path: Path, home: Home) -> None:
    with modern_host(tmp_path, home, "raw") as (proxy, _stamp):

        def logs() -> list[dict[str, Any]]:
            return [m for m in map(json.loads, proxy.lines) if m.get("method") == "notifications/message"]

        proxy.send(call(1, "progress", **envelope(progressToken="tok")))  # no log level: no logs
        answer_line(proxy, 1)
        proxy.send(call(2, "progress", **envelope(progressToken="t2", **{"io.modelcontextprotocol/logLevel": "error"})))
        answer_line(proxy, 2)
        assert logs() == []  # the child's line is "info": below what either request asked for
        proxy.send(call(3, "progress", **envelope(**{"io.modelcontextprotocol/logLevel": "info"})))
        answer_line(proxy, 3)
        assert [m["params"] for m in logs()] == [{"level": "info", "data": "progress done", "logger": "raw"}]
        progress = [m["params"] for m in map(json.loads, proxy.lines) if m.get("method") == "notifications/progress"]
        assert [(p["progressToken"], p["progress"]) for p in progress] == [("tok", 1), ("tok", 2), ("t2", 1), ("t2", 2)]
    assert len(child_calls(tmp_path, "raw")) == 3
    assert all(c["id"].startswith("gatekeeper-fast-") for c in child_calls(tmp_path, "raw"))


def test_a_2026_hosts_cancellation_and_a_bad_envelope(tmp_path: Path, home: Home) -> None:
    with modern_host(tmp_path, home, "raw") as (proxy, stamp):
        proxy.send(call("s", "slow", **envelope()))
        wait_until(lambda: child_calls(tmp_path, "raw"), "the slow call to reach the child")
        proxy.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "s"}})

        def cancelled() -> list[dict[str, Any]]:
            return [m for m in child_lines(tmp_path, "raw") if m.get("method") == "notifications/cancelled"]

        notice = wait_until(cancelled, "the cancellation to reach the child")
        slow_id = child_calls(tmp_path, "raw")[0]["id"]
        assert notice[0]["params"]["requestId"] == slow_id and slow_id.startswith("gatekeeper-fast-")
        bad = envelope()
        del bad["io.modelcontextprotocol/clientCapabilities"]
        proxy.send(call("bad", "echo_line", **bad))  # the SDK's classifier refuses it, as before
        assert json.loads(answer_line(proxy, "bad"))["error"]["code"] == -32602
        proxy.send(call("plain", "echo_line"))  # no envelope on a 2026 connection: the SDK answers it
        assert "error" in json.loads(answer_line(proxy, "plain"))
        proxy.send(call("after", "echo_line", **envelope()))
        answer_line(proxy, "after")
        proxy.send(call("die", "die", **envelope()))  # the child exits mid-call: today's answer, 2026-shaped
        died = json.loads(answer_line(proxy, "die"))["result"]
        assert died["isError"] is True and "stopped during the call" in died["content"][0]["text"]
        assert died["resultType"] == "complete" and died["_meta"]["io.modelcontextprotocol/serverInfo"] == stamp
    assert not [line for line in proxy.lines if _answers(line, "s")]
    assert [c["params"]["name"] for c in child_calls(tmp_path, "raw")] == ["slow", "echo_line", "die"]
    assert all(c["id"].startswith("gatekeeper-fast-") for c in child_calls(tmp_path, "raw"))


def test_a_2026_host_gets_todays_answer_when_the_child_asks_for_input(tmp_path: Path, home: Home) -> None:
    with modern_host(tmp_path, home, "raw") as (proxy, stamp):
        proxy.send(call("ask", "ask", **envelope()))
        result = json.loads(answer_line(proxy, "ask"))["result"]
    assert result["isError"] is True and result["resultType"] == "complete"
    assert result["content"][0]["text"] == "Gatekeeper hit an internal error handling 'ask'; details are in its log."
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == stamp
    assert child_calls(tmp_path, "raw")[0]["id"].startswith("gatekeeper-fast-")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_sdk_client_in_either_era_is_answered_raw(tmp_path: Path, home: Home, mode: str) -> None:
    import anyio

    from tests.proxy_support import proxied

    logs: list[str] = []
    steps: list[float] = []

    async def on_log(params: Any) -> None:
        logs.append(str(params.data))

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(progress)

    async def main() -> tuple[str, Any]:
        async with proxied(
            raw_policy(tmp_path, "raw"), home.path, mode, logging_callback=on_log, log_level="info"
        ) as c:
            await c.list_tools()
            result = await c.call_tool("progress", {}, progress_callback=on_progress)
            return c.protocol_version, result

    version, result = anyio.run(main)
    assert version == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert result.content[0].text == "done" and steps == [1, 2] and logs == ["progress done"]
    assert child_calls(tmp_path, "raw")[0]["id"].startswith("gatekeeper-fast-")


def test_a_2026_hosts_resource_reads_and_prompts_go_through_raw(tmp_path: Path, home: Home) -> None:
    read = {"jsonrpc": "2.0", "id": 8, "method": "resources/read", "params": {"uri": "raw://note"}}
    direct = json.loads(direct_answer(tmp_path, read))["result"]
    with modern_host(tmp_path, home, "raw") as (proxy, stamp):
        proxy.send({**read, "params": {"uri": "raw://note", "_meta": envelope()}})
        note = json.loads(answer_line(proxy, 8))["result"]
        get = {"name": "hello", "arguments": {"who": "x"}, "_meta": envelope()}
        proxy.send({"jsonrpc": "2.0", "id": 9, "method": "prompts/get", "params": get})
        prompt = json.loads(answer_line(proxy, 9))["result"]
    stamped = {"resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": stamp}}
    assert note == {**direct, **stamped, "ttlMs": 0, "cacheScope": "private"}  # as the SDK path fills them in
    assert prompt["resultType"] == "complete" and prompt["_meta"] == {"io.modelcontextprotocol/serverInfo": stamp}
    seen = json.loads(prompt["messages"][0]["content"]["text"])
    assert seen["params"] == {"name": "hello", "arguments": {"who": "x"}}  # no envelope toward a 2025 child
    received = [m for m in child_lines(tmp_path, "raw") if m.get("method") in ("resources/read", "prompts/get")]
    assert [m["method"] for m in received] == ["resources/read", "prompts/get"]
    assert all(m["id"].startswith("gatekeeper-fast-") for m in received)


def test_a_2026_host_gets_the_sdk_paths_answer_from_the_fast_path(tmp_path: Path, home: Home) -> None:
    """The same requests twice: once raw, once on the SDK path (a 20-digit number in ``_meta`` sends
    a request there, since orjson would round it); the answers must be the same JSON."""
    big = {"x": 12345678901234567890}
    requests = [
        ("tools/call", {"name": "odd", "arguments": {}}),
        ("tools/call", {"name": "echo_line", "arguments": {"a": 1}}),
        ("resources/read", {"uri": "raw://note"}),
        ("prompts/get", {"name": "hello", "arguments": {"who": "x"}}),
    ]
    with modern_host(tmp_path, home, "raw") as (proxy, _stamp):
        answers = []
        for n, (method, params) in enumerate(requests):
            for path, extra in (("fast", {}), ("sdk", big)):
                rid = f"{path}-{n}"
                proxy.send(
                    {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": envelope(**extra)}}
                )
                answers.append((rid, json.loads(answer_line(proxy, rid))["result"]))
    ids = [
        m["id"]
        for m in child_lines(tmp_path, "raw")
        if m.get("method") in ("tools/call", "resources/read", "prompts/get")
    ]
    assert [isinstance(i, str) and i.startswith("gatekeeper-fast-") for i in ids] == [True, False] * len(requests)
    for (fast_id, fast), (sdk_id, sdk) in zip(answers[::2], answers[1::2], strict=True):
        if "messages" in fast:  # the prompt echoes the line the child got: ids differ
            fast["messages"][0]["content"]["text"] = sdk["messages"][0]["content"]["text"] = ""
        if "content" in fast and fast["content"][0]["text"].startswith("{"):  # echo_line: the same
            fast["content"][0]["text"] = sdk["content"][0]["text"] = ""
        assert fast == sdk, (fast_id, sdk_id)

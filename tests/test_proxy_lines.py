"""Lines as they arrive on real pipes, however the reads cut them (issue 12's per-call work).

The usual read is one whole line; both splitters (the child's stdout, proxy/servers/stdio/process.py; the host's
stdin, proxy/host/stdio.py) hand it on without their buffer, and fall back to it for anything else
(several lines, a part of one). Either way a line must reach the fast path without its ``\\r``,
a line it does not take must wait for the client in order, and no line behind a waiting one may
jump the queue. Before a host line is parsed, ``rpclines.shape`` says whether it may hold an
integer orjson would round and how deep it may nest, in one pass.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from gatekeeper.home import Home
from gatekeeper.proxy.protocol.limits import BIG_NUMBER
from gatekeeper.proxy.protocol.lines import big_number, shape
from gatekeeper.proxy.servers.stdio.process import ChildCommand, ChildPipe, child_process
from tests.test_proxy_fastpath import child_calls, raw_host, wait_until

pytestmark = pytest.mark.timeout(60)

# A child that writes chunk N of its script, in one write, when told "N" on its stdin.
SCRIPTED = """
import os, sys
chunks = [bytes.fromhex(h) for h in sys.argv[1:]]
for line in sys.stdin:
    os.write(1, chunks[int(line)])
"""
CHUNKS = [
    b'{"take":0}\r\n',  # one whole line with CRLF: the tap gets it without the CR
    b'{"leave":1}\n',  # one whole line the tap refuses: it waits for the client
    b'{"take":2}\n',  # behind a line the client still handles: queued in order, never offered
    b'{"take":3}\n{"take":4}\r\n{"leave":5}\n',  # several lines in one read
    b'{"leave":7}\n{"take":',  # a whole line and a part of the next ...
    b"6}\n",  # ... and its rest, read on its own (the client took the first one before it was sent)
]


@pytest.mark.anyio
async def test_a_childs_lines_reach_the_tap_or_the_client_in_order_however_they_are_read(tmp_path: Path) -> None:
    offered: list[bytes] = []

    def tap(line: bytes) -> bool:
        offered.append(line)
        return b"take" in line

    async def offered_up_to(count: int) -> None:
        while len(offered) < count:  # polled under the fail_after deadline below
            await anyio.sleep(0.01)

    pipe = ChildPipe()
    pipe.tap = tap
    command = ChildCommand(sys.executable, ["-c", SCRIPTED, *(c.hex() for c in CHUNKS)])
    with open(tmp_path / "child.err", "w", encoding="utf-8") as errlog, anyio.fail_after(20):
        async with child_process(command, errlog, pipe) as child:
            assert child.stdin is not None

            async def step(n: int) -> None:
                await child.stdin.send(f"{n}\n".encode())

            await step(0)
            await offered_up_to(1)
            await step(1)
            await offered_up_to(2)
            assert await child.stdout.next_line() == b'{"leave":1}'
            await step(2)  # while the client still handles that line (no ``done`` yet)
            assert await child.stdout.next_line() == b'{"take":2}'  # queued behind it, not offered
            child.stdout.done()
            await step(3)
            assert await child.stdout.next_line() == b'{"leave":5}'
            child.stdout.done()
            await step(4)
            assert await child.stdout.next_line() == b'{"leave":7}'  # so the part is in the buffer
            child.stdout.done()
            await step(5)
            await offered_up_to(7)
    assert offered == [
        b'{"take":0}',
        b'{"leave":1}',
        b'{"take":3}',
        b'{"take":4}',
        b'{"leave":5}',
        b'{"leave":7}',
        b'{"take":6}',
    ]


def test_a_hosts_crlf_lines_take_the_fast_path_whole_or_in_parts(tmp_path: Path, home: Home) -> None:
    def request(rid: int) -> bytes:
        params = {"name": "echo_line", "arguments": {"text": f"t{rid}"}}
        return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()

    with raw_host(tmp_path, home, "raw") as proxy:
        assert proxy.proc.stdin is not None
        proxy.send(request(1) + b"\r")  # one whole line, CRLF, in one write
        assert "result" in proxy.wait_for(1)
        proxy.send(request(2) + b"\r\n" + request(3) + b"\r")  # two lines in one write
        assert "result" in proxy.wait_for(2) and "result" in proxy.wait_for(3)
        proxy.proc.stdin.write(request(4) + b"\r\n" + request(5)[:20])  # a line and a part of the next ...
        proxy.proc.stdin.flush()
        assert "result" in proxy.wait_for(4)  # ... read: the part waits in the buffer
        proxy.send(request(5)[20:] + b"\r")  # its rest, in a read of its own
        assert "result" in proxy.wait_for(5)
        calls = wait_until(lambda: child_calls(tmp_path, "raw")[4:], "the fifth call at the child")
        ids = [c["id"] for c in child_calls(tmp_path, "raw")]
        assert ids == [f"gatekeeper-fast-{n}" for n in range(5)], calls  # each took the fast path


@pytest.mark.parametrize(
    ("line", "big", "openers"),
    [
        (b'{"id":1,"params":{"x":[12345678901234567890]}}', True, 3),  # 20 digits in a row
        (b'{"x":1234567890123456789}', True, 1),  # 19: maybe past 64 bits
        (b'{"x":123456789012345678}', False, 1),  # 18 fit in 64 bits
        (b'{"a":[1234567890,123456789,12345678901]}', False, 2),  # 30 digits, no 19 in a row
        (b'{"s":"[{[{"}', False, 5),  # brackets in a string count too: depth() decides past MAX_DEPTH
    ],
)
def test_a_lines_shape_is_what_the_regex_and_a_bracket_count_say(line: bytes, big: bool, openers: int) -> None:
    assert shape(line) == (big, openers)
    assert big_number(line) is big
    assert big is (BIG_NUMBER.search(line) is not None)  # the one definition, only run less often

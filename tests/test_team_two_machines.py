"""Team mode end to end: two "machines" on one PostgreSQL, 10,000 proposals.

Each machine is a home of its own with its own workspace, policy and server, two proxies (real
stdio subprocesses driven by the official MCP client) and a committer (`commit --watch --server`)
for its server only. A third home runs the review page (the only one holding the private key);
two reviewers approve in batches with their passkeys over real HTTP, each within the servers the
review policy gives them, and reject a few. Agents retry some calls, as agents do.

Proven at the end: none lost (every title has its proposal), none duplicated (one proposal per
path, the retries included), no file created twice (one `created` outcome per path, the bytes on
disk exactly the proposal's, on the right machine only), every decision has exactly one outcome
event and one commit record, rejected files never appear, and `audit verify` passes from both
machines, which hold only public keys.

GATEKEEPER_TEAM_PROPOSALS sets the count (10,000 by default, as the issue asks).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from gatekeeper.store.target import PostgresUrl
from gatekeeper.trust.approval import unb64url
from tests.helpers import close_at_teardown
from tests.pg_support import connect
from tests.review_support import free_port
from tests.webauthn_authenticator import SoftAuthenticator

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
TOTAL = int(os.environ.get("GATEKEEPER_TEAM_PROPOSALS", "10000"))
PROXIES_PER_MACHINE = 2
IN_FLIGHT = 12  # concurrent calls per proxy
BATCH = 50  # proposals approved with one passkey assertion (the store's maximum)
REJECT_EVERY = 40  # every 40th proposal a reviewer sees is rejected
RETRY_EVERY = 25  # every 25th call is sent twice, as an agent retrying
PASSWORD = "team test passphrase, long enough"
MACHINES = ("a", "b")
REVIEWER_OF = {"a": "alice", "b": "bob"}

SERVER = """
  notes_{m}:
    command: {py}
    args: ["-m", "gatekeeper.demo.notes_server", "{workspace}"]
    workspace: {workspace}
    env: {{PYTHONPATH: "{repo}"}}
    tools:
      read_note: allow
      create_note:
        propose:
          path: {{template: "notes/{{{{ args.title | slug }}}}.md"}}
          content: {{arg: body}}
          globs: ["notes/**/*.md"]
          max_bytes: 1000
"""


@dataclass
class Machine:
    name: str
    home: Path
    policy: Path
    workspace: Path

    @property
    def server(self) -> str:
        return f"notes_{self.name}"


def policy_text(machines: list[Machine], reviewers: bool, port: int) -> str:
    text = f"version: 1\nreview_url: http://localhost:{port}\nservers:\n" + "".join(
        SERVER.format(m=m.name, py=PY, repo=REPO, workspace=m.workspace) for m in machines
    )
    if reviewers:
        text += "reviewers:\n" + "".join(f"  {REVIEWER_OF[m.name]}: {{servers: [{m.server}]}}\n" for m in machines)
    return textwrap.dedent(text)


def gk(home: Path, env: dict[str, str], *args: str, stdin: str = "") -> str:
    done = subprocess.run(
        [PY, "-m", "gatekeeper", "--home", str(home), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, f"gatekeeper {' '.join(args)}: {done.stdout}\n{done.stderr}"
    return done.stdout


@contextmanager
def process(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=out)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Reviewer:
    """A reviewer's browser tab as httpx, with a passkey (a software authenticator)."""

    def __init__(self, name: str, base: str) -> None:
        self.name, self.base = name, base
        self.client = httpx.Client(base_url=base, headers={"Origin": base, "Sec-Fetch-Site": "same-origin"}, timeout=60)
        close_at_teardown(self.client.close)
        self.auth = SoftAuthenticator(origin=base)
        self.csrf = ""
        self.approved: list[str] = []
        self.rejected: list[str] = []

    def enrol(self, link: str) -> None:
        token = link.rstrip("/").rsplit("/", 1)[1]
        html = self.client.get(f"/enrol/{token}").text
        found = re.search(r'data-options="([^"]+)"', html)
        assert found, html[:500]
        options = found.group(1).replace("&#34;", '"').replace("&quot;", '"')
        credential = self.auth.register_options(options)
        done = self.client.post(f"/api/enrol/{token}", data={"credential": json.dumps(credential), "label": "key"})
        assert done.status_code == 200, done.text

    def login(self) -> None:
        form = self.client.get("/login").text
        token = re.search(r'name="csrf_token" value="([^"]+)"', form)
        assert token
        done = self.client.post(
            "/login", data={"username": self.name, "password": PASSWORD, "csrf_token": token.group(1)}
        )
        assert done.status_code in (302, 303), done.text
        queue = self.client.get("/").text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', queue)
        assert csrf, queue[:500]
        self.csrf = csrf.group(1)

    def pending(self, server: str) -> list[dict[str, Any]]:
        got = self.client.get("/api/proposals", params={"status": "pending", "server": server, "limit": 1000})
        assert got.status_code == 200, got.text
        return list(got.json()["proposals"])

    def decide_some(self, server: str) -> int:
        """One round over what is pending now (up to 1,000): reject every REJECT_EVERY-th (by its
        digest), approve the rest BATCH at a time, one passkey assertion per batch."""
        rows = self.pending(server)
        chosen = []
        for row in rows:
            if int(row["sha256"][:8], 16) % REJECT_EVERY == 0:
                self.reject(row)
            else:
                chosen.append(row)
        for start in range(0, len(chosen), BATCH):
            self.approve(chosen[start : start + BATCH])
        return len(rows)

    def reject(self, row: dict[str, Any]) -> None:
        done = self.client.post(
            f"/proposals/{row['id']}/reject",
            data={
                "csrf_token": self.csrf,
                "reason": "not this one",
                "sha256": row["sha256"],
                "path": row["path"],
                "mode": row["mode"],
            },
        )
        assert done.status_code in (200, 303), done.text
        self.rejected.append(row["id"])

    def approve(self, rows: list[dict[str, Any]]) -> None:
        ids = [r["id"] for r in rows]
        start = self.client.post("/api/challenge", data={"csrf_token": self.csrf, "ids": ids})
        assert start.status_code == 200, start.text
        body = start.json()
        signed = self.auth.assert_(unb64url(body["options"]["challenge"]))
        items = [{"id": r["id"], "sha256": r["sha256"], "path": r["path"], "mode": r["mode"]} for r in rows]
        done = self.client.post(
            "/api/approve-selected",
            data={
                "csrf_token": self.csrf,
                "items": json.dumps(items),
                "nonce": body["nonce"],
                "digests": json.dumps(body["digests"]),
                "credential": json.dumps(signed),
            },
        )
        assert done.status_code == 200, done.text
        self.approved.extend(done.json()["approved"])


async def agent(machine: Machine, index: int, env: dict[str, str], titles: list[str], errors: list[str]) -> None:
    """One proxy, IN_FLIGHT calls at a time; every RETRY_EVERY-th call sent twice."""
    params = StdioServerParameters(
        command=PY,
        args=["-m", "gatekeeper", "--home", str(machine.home), "proxy", "--policy", str(machine.policy)],
        env=env,
        cwd=str(machine.home),
    )
    queue: asyncio.Queue[str] = asyncio.Queue()
    for title in titles:
        queue.put_nowait(title)
    with open(machine.home / f"proxy-{index}.log", "a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:

            async def worker() -> None:
                while not queue.empty():
                    title = queue.get_nowait()
                    args = {"title": title, "body": body_of(title)}
                    for _ in range(2 if int(title.rsplit("-", 1)[1]) % RETRY_EVERY == 0 else 1):
                        result = await client.call_tool("create_note", args)
                        text = " ".join(getattr(c, "text", "") for c in result.content)
                        if result.is_error or "Proposed, not written" not in text:
                            errors.append(f"{title}: {text[:300]}")

            t0 = time.monotonic()
            await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
            print(f"proxy {machine.name}{index}: {len(titles)} calls in {time.monotonic() - t0:.2f} s", flush=True)


def body_of(title: str) -> str:
    return f"# {title}\n\nwritten by {title.split('-')[0]} for the team test\n"


def slug(title: str) -> str:
    return title.lower()


def count(url: PostgresUrl, sql: str, *params: Any) -> int:
    conn = connect(url)
    return int(conn.execute(sql, params).fetchone()[0])


@pytest.mark.timeout(900)
def test_two_machines_one_postgres_ten_thousand_proposals(tmp_path: Path, postgres_database: PostgresUrl) -> None:
    url = postgres_database
    env = {**os.environ, "PYTHONPATH": str(REPO), "GATEKEEPER_DATABASE_URL": url.url, "GATEKEEPER_START_TIMEOUT": "30"}
    env.pop("GATEKEEPER_HOME", None)
    machines = [
        Machine(m, tmp_path / f"home-{m}", tmp_path / f"policy-{m}.yaml", tmp_path / f"ws-{m}") for m in MACHINES
    ]
    port = free_port()
    base = f"http://localhost:{port}"
    review_home, review_policy = tmp_path / "home-review", tmp_path / "policy-review.yaml"
    review_policy.write_text(policy_text(machines, reviewers=True, port=port))
    for m in machines:
        (m.workspace / "notes").mkdir(parents=True)
        m.policy.write_text(policy_text([m], reviewers=False, port=port))

    gk(review_home, env, "init")
    public = tmp_path / "public-keys.json"
    public.write_text(gk(review_home, env, "keys", "export-public"))
    for m in machines:
        gk(m.home, env, "init", "--public-keys", str(public))  # verify-only: cannot approve
    links = {
        name: gk(
            review_home,
            env,
            "reviewer",
            "add",
            name,
            "--password-stdin",
            "--policy",
            str(review_policy),
            stdin=PASSWORD + "\n",
        )
        for name in REVIEWER_OF.values()
    }

    titles = {
        m.name: [f"{m.name}{p}-{i}" for p in range(PROXIES_PER_MACHINE) for i in range(TOTAL // 4)] for m in machines
    }
    with ExitStack() as stack:
        stack.enter_context(
            process(
                [
                    PY,
                    "-m",
                    "gatekeeper",
                    "--home",
                    str(review_home),
                    "review",
                    "--port",
                    str(port),
                    "--policy",
                    str(review_policy),
                ],
                env,
                tmp_path / "review.log",
            )
        )
        for m in machines:
            stack.enter_context(
                process(
                    [
                        PY,
                        "-m",
                        "gatekeeper",
                        "--home",
                        str(m.home),
                        "commit",
                        "--watch",
                        "--server",
                        m.server,
                        "--policy",
                        str(m.policy),
                    ],
                    env,
                    m.home / "commit.log",
                )
            )
        wait_http(base, tmp_path / "review.log")
        reviewers = {}
        for m in machines:
            r = Reviewer(REVIEWER_OF[m.name], base)
            link = re.search(r"https?://\S+/enrol/\S+", links[r.name])
            assert link, links[r.name]
            r.enrol(link.group(0))
            r.login()
            reviewers[m.name] = r

        errors: list[str] = []
        started = time.monotonic()

        async def agents() -> None:
            await asyncio.gather(
                *(
                    agent(m, p, env, [t for t in titles[m.name] if t.startswith(f"{m.name}{p}-")], errors)
                    for m in machines
                    for p in range(PROXIES_PER_MACHINE)
                )
            )

        # agents propose in a thread of their own while the reviewers decide here
        import threading

        agents_done = threading.Event()
        failure: list[BaseException] = []

        def run_agents() -> None:
            try:
                asyncio.run(agents())
            except BaseException as exc:
                failure.append(exc)
            finally:
                agents_done.set()

        thread = threading.Thread(target=run_agents)
        thread.start()
        deadline = time.monotonic() + 800
        while True:
            seen = sum(reviewers[m.name].decide_some(m.server) for m in machines)
            if agents_done.is_set() and seen == 0:
                break
            assert time.monotonic() < deadline, "reviewers did not get through the queue"
            if seen == 0:
                time.sleep(0.05)
        thread.join()
        assert not failure, failure
        assert not errors, errors[:5]
        proposed_at = time.monotonic() - started

        approved = {pid for r in reviewers.values() for pid in r.approved}
        rejected = {pid for r in reviewers.values() for pid in r.rejected}
        wait_for(
            lambda: count(url, "SELECT count(*) FROM commit_record") == len(approved), 600, "every approval committed"
        )

    # none lost, none duplicated
    assert count(url, "SELECT count(*) FROM proposal") == TOTAL
    assert count(url, "SELECT count(DISTINCT path || server) FROM proposal") == TOTAL
    assert approved.isdisjoint(rejected) and len(approved) + len(rejected) == TOTAL
    assert count(url, "SELECT count(*) FROM decision") == TOTAL
    # every outcome once, and it is `created`
    conn = connect(url)
    outcomes = Counter(
        r[0] for r in conn.execute("SELECT proposal_id FROM audit_event WHERE kind = 'commit_outcome'").fetchall()
    )
    assert set(outcomes) == approved and set(outcomes.values()) == {1}
    created = conn.execute("SELECT proposal_id, outcome FROM commit_record").fetchall()
    assert {pid for pid, _ in created} == approved and {o for _, o in created} == {"created"}
    # the bytes on disk: on the proposal's own machine only, exactly as proposed
    rows = conn.execute("SELECT id, server, path FROM proposal").fetchall()
    for m in machines:
        mine = {path for pid, server, path in rows if server == m.server and pid in approved}
        on_disk = {str(p.relative_to(m.workspace)) for p in m.workspace.rglob("*.md")}
        assert on_disk == mine
    for pid, server, path in rows[:: max(1, TOTAL // 500)]:
        m = next(x for x in machines if x.server == server)
        file = m.workspace / path
        title = Path(path).stem
        assert file.exists() == (pid in approved)
        if pid in approved:
            assert file.read_text() == body_of(title)
    # the chain and its checkpoints from each machine (public keys only); every signature and
    # passkey assertion again from machine a
    for m in machines:
        out = gk(m.home, env, "audit", "verify", "--policy", str(m.policy), *(["--approvals"] if m.name == "a" else []))
        assert out.startswith("OK") and "FAILED" not in out, out
        if m.name == "a":
            assert f"OK: {len(approved)} approval(s)" in out, out
    print(f"\n{TOTAL} proposals in {proposed_at:.1f} s")


def wait_http(base: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{base}/login", timeout=1)
            return
        except httpx.TransportError:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)

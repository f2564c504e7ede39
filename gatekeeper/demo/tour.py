"""The guided tour behind ``make demo`` (``--headless``: ``make demo-check``).

A temporary home and notes workspace, ``gatekeeper up`` (review page + committer), a scripted
agent that reads a note and proposes a new one through ``gatekeeper proxy``, a person (or, with
``--headless``, Playwright driving Chromium) approving it on the review page, then the created
file and ``gatekeeper audit show`` for it. Nothing is faked: every piece is the real command.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

POLICY = """\
version: 1
review_url: http://localhost:{port}
servers:
  notes:
    command: {python}
    args: ["-m", "gatekeeper.demo.notes_server", "./workspace"]
    workspace: ./workspace
    tools:
      read_note: allow
      list_notes: allow
      search_notes: allow
      create_note:
        propose:
          path: {{template: "notes/{{{{ args.title | slug }}}}.md"}}
          content: {{arg: body}}
          globs: ["notes/**/*.md"]
          max_bytes: 65536
"""
CHROMIUM = "/usr/bin/chromium"


def free_port(preferred: int = 8765) -> int:
    for port in (preferred, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise SystemExit("no free port on 127.0.0.1")


def bold(text: str) -> str:
    return f"\033[1m{text}\033[0m" if sys.stdout.isatty() else text


def step(text: str) -> None:
    print(f"\n{bold('== ' + text)}", flush=True)


def gk(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "gatekeeper", "--home", str(home), *args]


def approve_in_browser(login_link: str, review_url: str, password: str) -> None:
    """What the person does, done by Playwright in headless Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
            ],
        )
        page = browser.new_page()
        page.goto(login_link)
        page.goto(review_url)
        print(f"browser: reviewing {page.inner_text('#destination')} sha256 {page.inner_text('#sha256')[:16]}…")
        page.fill("#approve-password", password)  # approving asks for the password again
        page.click("#approve")
        page.wait_for_selector("#decision")
        print(f"browser: {page.inner_text('#decision')}", flush=True)
        browser.close()


def start_up(home: Path, port: int, policy: Path, password: str) -> tuple[subprocess.Popen[str], str, threading.Event]:
    """Step 2: ``gatekeeper up``; its one-time log-in link, and an event set once it commits."""
    up = subprocess.Popen(
        gk(home, "up", "--port", str(port), "--policy", str(policy), "--reviewer", "demo", "--password-stdin"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    assert up.stdin is not None and up.stdout is not None
    up.stdin.write(password + "\n")
    up.stdin.close()
    login_link = ""
    committed = threading.Event()
    for line in up.stdout:
        print(f"  up | {line.rstrip()}", flush=True)
        if match := re.search(r"(http://localhost:\d+/login/link\?token=\S+)", line):
            login_link = match.group(1)
        if "Ctrl-C stops" in line:
            break

    def relay() -> None:
        assert up.stdout is not None
        for line in up.stdout:
            print(f"  up | {line.rstrip()}", flush=True)
            if line.startswith("committed"):
                committed.set()

    if login_link:
        threading.Thread(target=relay, daemon=True).start()
    return up, login_link, committed


def run_agent(
    home: Path, policy: Path, login_link: str, password: str, headless: bool
) -> tuple[int, dict[str, Any], str]:
    """Steps 3 and 4: the scripted agent proposes; a person (or Chromium) approves on the page."""
    agent = subprocess.Popen(
        [sys.executable, "-m", "gatekeeper.demo.agent", "--policy", str(policy), "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
        env={**os.environ, "GATEKEEPER_HOME": str(home)},
    )
    assert agent.stdout is not None
    for line in agent.stdout:
        print(line.rstrip(), flush=True)
        if ">>> Review it here:" in line:
            review_url = line.split(">>> Review it here:", 1)[1].strip()
            if headless:
                step("4. Approving in headless Chromium (Playwright), as a person would")
                approve_in_browser(login_link, review_url, password)
            else:
                step("4. Your turn: approve it in the browser")
                print(f"Log in with this one-time link:\n  {login_link}\nthen open:\n  {review_url}", flush=True)
                print(f"and press 'Approve' with the demo reviewer's password: {password}", flush=True)
                print("(approving always asks for it again), or reject it with a reason. Waiting…", flush=True)
    status = agent.wait()
    stderr = agent.stderr.read() if agent.stderr else ""
    outcome = json.loads(stderr.strip().splitlines()[-1]) if stderr.strip() else {}
    return status, outcome, stderr


def stop(up: subprocess.Popen[str] | None) -> None:
    if up is not None and up.poll() is None:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(15)
        except subprocess.TimeoutExpired:
            up.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--headless", action="store_true", help="approve with Playwright + Chromium (make demo-check)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gatekeeper-tour."))
    home, port = tmp / "home", free_port()
    up: subprocess.Popen[str] | None = None
    try:
        step("1. A temporary home, a notes workspace and a policy")
        (tmp / "workspace" / "notes").mkdir(parents=True)
        (tmp / "workspace" / "notes" / "welcome.md").write_text("# Welcome\n\nThis note was here before the agent.\n")
        policy = tmp / "policy.yaml"
        policy.write_text(POLICY.format(python=sys.executable, port=port))
        print(f"workspace {tmp / 'workspace'}\npolicy    {policy}\nhome      {home}")
        subprocess.run(gk(home, "policy", "check", "--policy", str(policy)), check=True)

        step("2. gatekeeper up: the review page and the committer")
        password = secrets.token_urlsafe(18)  # the demo reviewer's; approving asks for it again
        up, login_link, committed = start_up(home, port, policy, password)
        if not login_link:
            print("gatekeeper up did not start; see above", file=sys.stderr)
            return 1

        step("3. A scripted agent (the MCP Python SDK) reads a note and proposes a new one")
        status, outcome, stderr = run_agent(home, policy, login_link, password, args.headless)
        if status != 0:
            print(f"agent ended with status {status}: {outcome or stderr}", file=sys.stderr)
            return 1

        step("5. The file the committer created")
        committed.wait(5)
        created = tmp / "workspace" / "notes" / "ideas-from-the-agent.md"
        print(f"{created}:\n{created.read_text()}")
        step(f"6. gatekeeper audit show {outcome['proposal_id']}")
        subprocess.run(gk(home, "audit", "show", outcome["proposal_id"]), check=True)
        subprocess.run(gk(home, "audit", "verify", "--files"), check=True)
        print(bold("\nDone: an agent's write reached the disk only after a person approved those exact bytes."))
        return 0
    finally:
        stop(up)
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

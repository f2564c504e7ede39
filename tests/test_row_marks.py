"""Issue 24 item 14: a database writer without keys cannot bring back an old password.

The attacker keeps a copy of alice's reviewer row, signed for her first password. After alice sets a
new one, they put the old row back and cut the ``reviewer_password_changed`` event from the chain,
renumbering and rehashing what follows: the old row is the one signed for her latest change again,
and no checkpoint covers the cut yet. The home that signed the change remembers its seq
(``trust/row_marks.py``): log-in and approval with the old password are refused at once, each
refusal an event, and ``audit verify`` names the row. The same for a removed passkey put back.
On SQLite (triggers dropped) and PostgreSQL (superuser, ``session_replication_role = replica``);
the review app over HTTP.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gatekeeper.cli import cli
from gatekeeper.errors import Conflict
from gatekeeper.home import Home
from gatekeeper.store.proofs import PasswordProof
from gatekeeper.store.store import Store
from gatekeeper.trust.approval import ApprovalRefused
from gatekeeper.trust.passwords import hash_password
from tests.helpers import draft
from tests.passkey_support import approve, enrol, sign
from tests.pg_support import BACKENDS, connect_now
from tests.review_support import PASSWORD, Page, hashed, review_app
from tests.tamper_support import cut_events, unguarded

NEW = "a new passphrase, the old one leaked"
LATER = "this home signed a later change of it at seq"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def refusals(home: Home) -> list[str]:
    conn = connect_now(home.database)
    try:
        rows = conn.execute("SELECT payload FROM audit_event WHERE kind = 'reviewer_row_refused'").fetchall()
    finally:
        conn.close()
    return [str(r[0]) for r in rows]


@pytest.mark.timeout(120)
def test_an_old_row_put_back_with_its_change_cut_from_the_chain_neither_logs_in_nor_approves(home: Home) -> None:
    with Store(home.database, keys_dir=home.keys.folder) as store:
        store.add_reviewer("alice", hashed())
        p = store.propose(draft())
    conn = connect_now(home.database)
    try:
        old = conn.execute("SELECT password_hash, key_id, signature FROM reviewer WHERE name = 'alice'").fetchone()
    finally:
        conn.close()
    with Store(home.database, keys_dir=home.keys.folder) as store:
        store.set_reviewer_password("alice", hash_password(NEW))
    with unguarded(home.database) as conn:
        conn.execute(
            "UPDATE reviewer SET password_hash = ?, key_id = ?, signature = ? WHERE name = 'alice'", tuple(old)
        )
        assert cut_events(conn, lambda r: r[2] == "reviewer_password_changed") == 1
    with review_app(home) as site:
        assert Page(site).login("alice", PASSWORD).status_code != 303  # the old password no longer logs in
    assert len(refusals(home)) == 1 and LATER in refusals(home)[0]
    with Store(home.database, keys_dir=home.keys.folder) as store, pytest.raises(Conflict, match=LATER):
        store.decide(
            p.id, verdict="approved", reviewer="alice", sha256=p.sha256, path=str(draft().path),
            proof=PasswordProof(PASSWORD),
        )  # fmt: skip
    assert len(refusals(home)) == 2
    result = CliRunner().invoke(cli, ["--home", str(home.path), "audit", "verify"])
    assert result.exit_code == 1 and "REVIEWER alice: " in result.output and LATER in result.output, result.output


@pytest.mark.timeout(120)
def test_a_removed_passkey_put_back_with_its_removal_cut_from_the_chain_does_not_approve(home: Home) -> None:
    with Store(home.database, keys_dir=home.keys.folder) as store:
        store.add_reviewer("alice", hashed())
        auth = enrol(store)
        (credential_id,) = [k.credential_id for k in store.passkeys("alice")]
        p = store.propose(draft())
    conn = connect_now(home.database)
    try:
        live = conn.execute(
            "SELECT removed_at, key_id, signature FROM passkey WHERE credential_id = ?", (credential_id,)
        ).fetchone()
    finally:
        conn.close()
    with Store(home.database, keys_dir=home.keys.folder) as store:
        store.remove_passkey("alice", credential_id)  # the authenticator was lost
    with unguarded(home.database) as conn:
        conn.execute(
            "UPDATE passkey SET removed_at = ?, key_id = ?, signature = ? WHERE credential_id = ?",
            (*live, credential_id),
        )
        assert cut_events(conn, lambda r: r[2] == "passkey_removed") == 1
    with Store(home.database, keys_dir=home.keys.folder) as store:
        assert store.passkey(credential_id) is None  # what passkey log-in looks up: as if unknown
        challenge = store.issue_challenge("alice", [p.id])
        with pytest.raises(ApprovalRefused, match=LATER):
            approve(store, home, p, str(draft().path), sign(auth, challenge))
    assert len(refusals(home)) == 2 and all(LATER in r for r in refusals(home))

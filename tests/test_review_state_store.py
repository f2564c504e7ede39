"""The review page's state in the store (``store.reviews``) on both backends: sessions, single-use
nonces, the log-in throttle. The page itself over HTTP is tests/test_review*.py (SQLite so far)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gatekeeper.store.reviews import Reviews
from gatekeeper.store.store import Store
from tests.helpers import TEST_HASH, add_reviewer
from tests.pg_support import BACKENDS


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def reviews(store: Store) -> Reviews:
    add_reviewer(store)
    r = Reviews(store)
    yield r
    r.close()


def test_sessions_end_with_logout_and_with_a_disabled_reviewer(store: Store, reviews: Reviews) -> None:
    assert reviews.password_hash("alice") == TEST_HASH and reviews.is_reviewer("alice")
    first = reviews.start_session("alice", timedelta(hours=1), "password")
    assert reviews.session(first.id) == first
    reviews.end_session(first)
    assert reviews.session(first.id) is None
    second = reviews.start_session("alice", timedelta(hours=1), "password")
    store.disable_reviewer("alice")
    assert reviews.session(second.id) is None and reviews.password_hash("alice") is None


def test_a_nonce_is_used_once(reviews: Reviews) -> None:
    assert reviews.use_nonce("n1", "decision")
    assert not reviews.use_nonce("n1", "decision")  # the UNIQUE index refuses the replay
    assert reviews.use_nonce("n2", "decision")  # and the store goes on


def test_the_login_throttle_counts_attempts_per_name(reviews: Reviews) -> None:
    window = timedelta(minutes=15)
    attempts = [reviews.begin_login_attempt("key-a", 2, window) for _ in range(3)]
    assert attempts[0] is not None and attempts[1] is not None and attempts[1] > attempts[0]
    assert attempts[2] is None  # two in flight: the third waits for the window
    assert reviews.begin_login_attempt("key-b", 2, window) is not None  # another name is not held back
    reviews.finish_login_attempt(attempts[0], ok=True)  # a success stops counting
    assert reviews.begin_login_attempt("key-a", 2, window) is not None

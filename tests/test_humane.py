"""Sizes and times as a person reads them, and the exact value kept beside."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gatekeeper import humane

NOW = datetime(2026, 12, 4, 16, 54, 27, tzinfo=UTC)


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (999, "999 bytes"),
        (1000, "1.0 KB"),
        (1234, "1.2 KB"),
        (198_000, "198 KB"),
        (999_499, "999 KB"),
        (999_500, "1.0 MB"),
        (52_428_800, "52 MB"),
        (2_000_000_000, "2.0 GB"),
    ],
)
def test_size(n: int, text: str) -> None:
    assert humane.size(n) == text


def test_size_delta_has_a_sign() -> None:
    assert humane.size_delta(106) == "+106 bytes"
    assert humane.size_delta(-1234) == "−1.2 KB"


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(seconds=10), "just now"),
        (timedelta(minutes=5), "5 min ago"),
        (timedelta(hours=3, minutes=10), "3 h ago"),
        (timedelta(days=1), "1 day ago"),
        (timedelta(days=2), "2 days ago"),
        (timedelta(minutes=-4), "in 4 min"),
    ],
)
def test_ago(delta: timedelta, text: str) -> None:
    stored = (NOW - delta).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert humane.ago(stored, NOW) == text


def test_old_instants_show_a_date_with_the_year() -> None:
    assert humane.ago("2025-01-02T03:04:05.000000Z", NOW).endswith("2025")


def test_iso_round_trips_the_stored_form() -> None:
    stored = "2026-12-04T16:54:27.123456Z"
    assert humane.iso(stored) == stored
    assert humane.parse(stored) == datetime(2026, 12, 4, 16, 54, 27, 123456, tzinfo=UTC)


def test_local_names_the_day(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    import time

    time.tzset()
    assert humane.local("2026-12-04T16:54:27Z") == "Fri 4 Dec 16:54"

"""The one backoff: growing, capped, jittered within its bounds, and reset by a success."""

import pytest

from hub.backoff import Backoff
from hub.platform import Backoff as PlatformBackoff


def test_delays_double_up_to_the_cap_and_stay_within_the_jitter() -> None:
    b = Backoff(first=0.5, most=4.0, jitter=0.5)
    for attempt, cap in enumerate([0.5, 1.0, 2.0, 4.0, 4.0, 4.0]):
        for _ in range(50):
            assert cap / 2 <= b.delay(attempt) <= cap
    assert Backoff(first=1, most=8, jitter=0).delay(2) == 4.0
    assert Backoff(first=1, most=8).delay(10_000) <= 8  # no overflow on a long outage


def test_retry_after_is_a_floor_bounded_by_the_cap() -> None:
    b = Backoff(first=0.1, most=10.0)
    assert b.delay(0, retry_after=3) == 3
    assert b.delay(0, retry_after=60) == 10
    assert b.delay(0, retry_after=-5) <= 0.1


def test_next_counts_failures_and_reset_starts_over() -> None:
    b = Backoff(first=1, most=100, jitter=0)
    assert [b.next(), b.next(), b.next()] == [1, 2, 4]
    assert b.failures == 3
    b.reset()
    assert b.next() == 1


def test_bad_bounds_are_refused_with_the_value() -> None:
    with pytest.raises(ValueError, match="jitter must be between 0 and 1, not 2"):
        Backoff(jitter=2)
    with pytest.raises(ValueError, match="must not be negative"):
        Backoff(first=-1)


def test_platform_reexports_the_same_class() -> None:
    assert PlatformBackoff is Backoff

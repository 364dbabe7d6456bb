"""The dashboard's parts on their own: sessions (expiry when idle and after their lifetime, a
bounded number, CSRF tokens per session), the token check, the login throttle."""

from __future__ import annotations

from hub.http.dashboard import LoginThrottle, Sessions, token_matches


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_expires_when_idle_and_after_its_lifetime() -> None:
    clock = Clock()
    sessions = Sessions(idle=60, lifetime=300, clock=clock)
    s = sessions.create()
    for _ in range(4):  # kept alive by use, 50 s apart...
        clock.now += 50
        assert sessions.get(s.id) is s
    clock.now += 101  # ...until its lifetime is over, used or not
    assert sessions.get(s.id) is None
    assert len(sessions) == 0
    idle = sessions.create()
    clock.now += 61
    assert sessions.get(idle.id) is None


def test_sessions_are_bounded_and_each_has_its_own_csrf_token() -> None:
    sessions = Sessions(max_sessions=3)
    made = [sessions.create() for _ in range(5)]
    assert len(sessions) == 3
    assert sessions.get(made[0].id) is None and sessions.get(made[1].id) is None  # the oldest went first
    assert all(sessions.get(s.id) is s for s in made[2:])
    assert len({s.csrf for s in made}) == 5 and len({s.id for s in made}) == 5
    a, b = made[3], made[4]
    assert a.csrf_matches(a.csrf) and not a.csrf_matches(b.csrf)
    assert not a.csrf_matches("") and not a.csrf_matches(None) and not a.csrf_matches("é" + a.csrf[1:])
    sessions.drop(a.id)
    assert sessions.get(a.id) is None
    assert sessions.get(None) is None and sessions.get("x" * 500) is None


def test_the_token_check() -> None:
    assert token_matches("secret-token", "secret-token")
    assert not token_matches("secret-toke", "secret-token")
    assert not token_matches("", "")  # no token configured: nobody logs in
    assert token_matches("sécret-\u00e9", "sécret-\u00e9")  # a form posts UTF-8
    assert not token_matches("s\udcffcret", "secret")  # a lone surrogate cannot crash the check


def test_wrong_tokens_are_throttled_per_address() -> None:
    clock = Clock()
    throttle = LoginThrottle(limit=3, window=60, max_addresses=2, clock=clock)
    for _ in range(3):
        assert throttle.wait("10.0.0.1") == 0
        throttle.failed("10.0.0.1")
        clock.now += 1
    assert throttle.wait("10.0.0.1") == 57  # until the first failure leaves the window
    assert throttle.wait("10.0.0.2") == 0  # another address is not held back
    clock.now += 57
    assert throttle.wait("10.0.0.1") == 0
    throttle.failed("10.0.0.1")
    throttle.succeeded("10.0.0.1")  # the right token clears the count
    assert throttle.wait("10.0.0.1") == 0
    for address in ("a", "b", "c"):  # bounded: the stalest address is forgotten
        throttle.failed(address)
    assert len(throttle._failures) == 2 and "a" not in throttle._failures


def test_wrong_tokens_across_all_addresses_are_a_surge_that_holds_nobody_back() -> None:
    """Past ``global_limit`` failures from anyone within the window the throttle says someone
    is guessing; an address under its own limit still may try (its right token logs in)."""
    clock = Clock()
    throttle = LoginThrottle(limit=3, global_limit=5, window=60, clock=clock)
    for i in range(5):
        assert throttle.wait(f"10.0.0.{i}") == 0
        throttle.failed(f"10.0.0.{i}")
        clock.now += 1
    assert throttle.surge() and throttle.wait("10.9.9.9") == 0 and throttle.wait("10.0.0.1") == 0
    clock.now += 55
    assert not throttle.surge()

"""The dashboard's sessions: who logged in with the ``[http] token``, and their CSRF tokens.

An operator logs in by posting the token (compared in constant time); the browser then holds
only a random session id in a cookie (HttpOnly, SameSite=Strict, Path=/ui, Secure over
https). Each session has its own CSRF token, which every change (a POST) must carry, in the
form or in the ``X-CSRF-Token`` header that htmx sends. Wrong tokens are counted per client
address (`LoginThrottle`): after ``limit`` from one address within ``window`` seconds,
that address is refused for the rest of the window. Other addresses' failures never refuse a
login: past ``global_limit`` from all addresses together the dashboard logs that someone is
guessing, and the right token still logs in (a token has 16 characters or more, so rotating
addresses at ``limit`` a minute each cannot find it). Sessions end on logout, after
``idle`` seconds without a request, and ``lifetime`` seconds after login whatever happens;
at most ``max_sessions`` are kept (the oldest goes first), so a flood of logins cannot grow
memory. They live on the dashboard of one hub (no global state) and do not survive a restart:
the operator logs in again.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Session", "Sessions", "LoginThrottle", "COOKIE", "token_matches"]

COOKIE = "hub_session"


def token_matches(given: str, token: str) -> bool:
    """Whether ``given`` is the ``[http] token``, in constant time (never for an empty token)."""
    if not token:
        return False
    # a form posts UTF-8, so a token with non-ASCII characters works too (a header could not carry it)
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8", "replace"))


@dataclass(slots=True)
class Session:
    id: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    created: float = 0.0
    seen: float = 0.0
    flash: str = ""  # what the next page says about the change just made
    # the key of this login's chat conversation (web:chat:KEY): random, not the secret id
    chat: str = field(default_factory=lambda: secrets.token_hex(6))

    def take_flash(self) -> str:
        msg, self.flash = self.flash, ""
        return msg

    def csrf_matches(self, given: str | None) -> bool:
        if not given or not given.isascii():  # the token is URL-safe ASCII: anything else is wrong
            return False
        return hmac.compare_digest(given.encode(), self.csrf.encode())


class Sessions:
    """The live sessions of one dashboard, oldest first."""

    def __init__(
        self,
        *,
        idle: float = 8 * 3600,
        lifetime: float = 7 * 86400,
        max_sessions: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle = idle
        self.lifetime = lifetime
        self.max_sessions = max_sessions
        self._clock = clock
        self._live: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._live)

    def create(self) -> Session:
        now = self._clock()
        session = Session(created=now, seen=now)
        self._live[session.id] = session
        while len(self._live) > self.max_sessions:
            self._live.popitem(last=False)
        return session

    def get(self, sid: str | None) -> Session | None:
        """The session with id ``sid``, if it is live (and now seen); an expired one is dropped."""
        if not sid or len(sid) > 100:
            return None
        session = self._live.get(sid)
        if session is None:
            return None
        now = self._clock()
        if now - session.seen > self.idle or now - session.created > self.lifetime:
            del self._live[sid]
            return None
        session.seen = now
        return session

    def drop(self, sid: str | None) -> None:
        if sid:
            self._live.pop(sid, None)


class LoginThrottle:
    """At most ``limit`` wrong tokens per client address within ``window`` seconds; past it,
    logins from that address wait until its oldest failure counted leaves the window. The
    failures of all addresses together are counted too, but only to tell (`surge()`): one
    client's failures never hold back another's right token. Bounded to ``max_addresses``
    addresses."""

    def __init__(
        self,
        *,
        limit: int = 10,
        global_limit: int = 60,
        window: float = 60.0,
        max_addresses: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.global_limit = global_limit
        self.window = window
        self.max_addresses = max_addresses
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._all: deque[float] = deque(maxlen=global_limit)  # the latest failures, from anyone

    def _recent(self, address: str) -> deque[float]:
        times = self._failures.get(address)
        if times is None:
            return deque()
        cutoff = self._clock() - self.window
        while times and times[0] <= cutoff:
            times.popleft()
        if not times:
            del self._failures[address]
        return times

    def _until(self, times: deque[float], limit: int) -> float:
        """Seconds until fewer than ``limit`` of ``times`` are in the window."""
        cutoff = self._clock() - self.window
        recent = [t for t in times if t > cutoff]
        if len(recent) < limit:
            return 0.0
        return max(0.0, recent[-limit] + self.window - self._clock())

    def wait(self, address: str) -> float:
        """Seconds ``address`` must wait before it may try a token again (0: it may now): its
        own failures only."""
        return self._until(self._recent(address), self.limit)

    def surge(self) -> bool:
        """Whether ``global_limit`` wrong tokens from all addresses together fell in the window
        (for the log: someone is guessing; nobody is refused for it)."""
        return self._until(self._all, self.global_limit) > 0

    def failed(self, address: str) -> None:
        now = self._clock()
        self._all.append(now)
        times = self._failures.pop(address, None) or deque()
        times.append(now)
        self._failures[address] = times  # the most recent last: the stalest address goes first
        while len(self._failures) > self.max_addresses:
            self._failures.popitem(last=False)

    def succeeded(self, address: str) -> None:
        self._failures.pop(address, None)

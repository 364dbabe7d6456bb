"""One aiohttp session per event loop and base URL, shared by every model client that uses it.

A client per model and per key (failover, key pools) must be cheap: they share one
connection pool to the same server, so a second key costs an object, not a pool of
sockets. Each client bounds its own calls in flight (``concurrency``); the shared
connector has no limit of its own. The session is closed when its last client closes.
"""

from __future__ import annotations

import asyncio
import urllib.request
from urllib.parse import urlsplit

import aiohttp

__all__ = ["SessionLease", "env_proxy"]

_SHARED: dict[tuple[asyncio.AbstractEventLoop, str], tuple[aiohttp.ClientSession, int]] = {}


class SessionLease:
    """A client's hold on the shared session of its base URL on the running loop.

    ``session()`` opens or joins it (on first use: a client may be built outside a loop);
    ``release()`` lets it go. A client used on a second loop (tests, ``asyncio.run`` twice)
    leaves the first and joins that loop's session.
    """

    __slots__ = ("base_url", "_loop", "_session")

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._session
        if session is not None and self._loop is loop and not session.closed:
            return session
        if self._loop is not None:
            self._leave()
        key = (loop, self.base_url)
        held = _SHARED.get(key)
        if held is None or held[0].closed:
            # limit=0: each client bounds its own calls. No trust_env: it looks up .netrc and
            # the proxy in a worker thread on every request (a fifth of a turn's CPU); the
            # proxy is looked up once per client instead (env_proxy)
            connector = aiohttp.TCPConnector(limit=0)
            held = (aiohttp.ClientSession(connector=connector), 0)
        session = held[0]
        _SHARED[key] = (session, held[1] + 1)
        self._loop, self._session = loop, session
        return session

    async def release(self) -> None:
        """Let the session go; the last client to leave it closes it. Idempotent."""
        session = self._leave()
        if session is not None:
            await session.close()

    def _leave(self) -> aiohttp.ClientSession | None:
        """Drop this lease; the session to close if it was the last one (else None)."""
        loop, session = self._loop, self._session
        self._loop = self._session = None
        if loop is None or session is None:
            return None
        key = (loop, self.base_url)
        held = _SHARED.get(key)
        if held is None or held[0] is not session:
            return None
        if held[1] > 1:
            _SHARED[key] = (session, held[1] - 1)
            return None
        del _SHARED[key]
        # a session is closed on its own loop; one whose loop is gone or elsewhere is dropped
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        return session if running is loop and not loop.is_closed() else None


def shared_sessions() -> int:
    """How many shared sessions are open (for tests)."""
    return sum(1 for s, _ in _SHARED.values() if not s.closed)


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTP_PROXY``/``HTTPS_PROXY``, unless
    ``NO_PROXY`` exempts its host), as the SDK's httpx client honoured them; None: direct."""
    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme) or None

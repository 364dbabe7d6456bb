"""One pool of connections per event loop and base URL, shared by every model client that uses it.

A client per model and per key (failover, key pools) must be cheap: they share the
connections to the same server, so a second key costs an object, not a pool of sockets.
Each client bounds its own calls in flight (``concurrency``); the shared pool has no limit
of its own. It is closed when its last client closes.
"""

from __future__ import annotations

import asyncio
import urllib.request
from urllib.parse import urlsplit

import aiohttp

from ._http import Origin

__all__ = ["SessionLease", "env_proxy"]


class _Shared:
    """What the clients of one base URL on one loop share: the keep-alive connections of the
    chat request's path (`Origin`) and, made when first needed, an aiohttp session."""

    __slots__ = ("origin", "session", "leases")

    def __init__(self, base_url: str) -> None:
        self.origin = Origin(base_url)
        self.session: aiohttp.ClientSession | None = None
        self.leases = 0

    async def close(self) -> None:
        self.origin.close()
        if self.session is not None:
            await self.session.close()


_SHARED: dict[tuple[asyncio.AbstractEventLoop, str], _Shared] = {}


class SessionLease:
    """A client's hold on what the clients of its base URL share on the running loop.

    ``origin()`` and ``session()`` open or join it (on first use: a client may be built
    outside a loop); ``release()`` lets it go. A client used on a second loop (tests,
    ``asyncio.run`` twice) leaves the first and joins that loop's own.
    """

    __slots__ = ("base_url", "_loop", "_shared")

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self._loop: asyncio.AbstractEventLoop | None = None
        self._shared: _Shared | None = None

    def _join(self) -> _Shared:
        loop = asyncio.get_running_loop()
        shared = self._shared
        if shared is not None and self._loop is loop:
            return shared
        if self._loop is not None:
            self._leave()
        key = (loop, self.base_url)
        shared = _SHARED.get(key)
        if shared is None:
            shared = _SHARED[key] = _Shared(self.base_url)
        shared.leases += 1
        self._loop, self._shared = loop, shared
        return shared

    def origin(self) -> Origin:
        """The keep-alive connections of the chat request's path."""
        return self._join().origin

    def session(self) -> aiohttp.ClientSession:
        """The aiohttp session (a request through a proxy)."""
        shared = self._join()
        if shared.session is None or shared.session.closed:
            # limit=0: each client bounds its own calls. No trust_env: it looks up .netrc and
            # the proxy in a worker thread on every request (a fifth of a turn's CPU); the
            # proxy is looked up once per client instead (env_proxy)
            shared.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        return shared.session

    async def release(self) -> None:
        """Let it go; the last client to leave closes it. Idempotent."""
        shared = self._leave()
        if shared is not None:
            await shared.close()

    def _leave(self) -> _Shared | None:
        """Drop this lease; what to close if it was the last one (else None)."""
        loop, shared = self._loop, self._shared
        self._loop = self._shared = None
        if loop is None or shared is None:
            return None
        key = (loop, self.base_url)
        if _SHARED.get(key) is not shared:
            return None
        shared.leases -= 1
        if shared.leases > 0:
            return None
        del _SHARED[key]
        # closed on its own loop; what belongs to a loop that is gone or elsewhere is dropped
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        return shared if running is loop and not loop.is_closed() else None


def shared_sessions() -> int:
    """How many base URLs' shared connections are open (for tests)."""
    return len(_SHARED)


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTP_PROXY``/``HTTPS_PROXY``, unless
    ``NO_PROXY`` exempts its host), as the SDK's httpx client honoured them; None: direct."""
    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme) or None

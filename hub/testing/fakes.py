"""The base of every loopback fake of a remote API the hub talks to.

Each fake is a real aiohttp server on 127.0.0.1 (port 0), used as an async context manager,
so tests drive the *real* client libraries (openai, python-telegram-bot, discord.py,
tweepy) and exercise their own request, parsing and retry code. The platform fakes are
modules of this package (``hub.testing.telegram``, ``hub.testing.discord``, ...); a new
platform's fake subclasses [`FakeServer`][hub.testing.FakeServer] and implements ``_build_app``.

Shared by all of them (``FakeServer``): ``requests`` (every request received, in order),
``sent`` (every message the bot sent), ``fail_next(name, status=..., count=...)`` to make
the next calls of an endpoint fail, ``failures`` (the injected failures actually served),
``await wait_sent(n)`` / ``await wait_for(predicate)`` and ``calls(name)``.

A fake that serves files at a platform's media host (Discord's CDN, X's pictures) serves
them under that host's real name on its loopback port, and the extension under test is
given [`loopback_resolver()`][hub.testing.loopback_resolver] for those names: its downloads go through the real host and
address rules (``hub.platform.MediaHosts``), with only the lookup of those names pointed here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from ..media import Resolve, public_addresses

__all__ = ["FakeServer", "Failure", "Recorded", "loopback_resolver"]


def loopback_resolver(*names: str) -> Resolve:
    """A resolver that answers 127.0.0.1 for ``names`` (a fake's stand-ins for a platform's
    media hosts) and resolves every other host as the hub does, public addresses only: a
    test's URL to anything else (``localhost``, an IP of a private network) is still refused."""
    faked = {n.lower().rstrip(".") for n in names}

    async def resolve(host: str, port: int) -> Sequence[str]:
        if host.lower().rstrip(".") in faked:
            return ["127.0.0.1"]
        return await public_addresses(host, port)

    return resolve


@dataclass
class Recorded:
    """One request as the fake received it.

    ``name`` is the endpoint as the platform names it: ``sendMessage`` (Telegram),
    ``POST /channels/{channel_id}/messages`` (Discord), ``POST /2/tweets`` (X).
    ``params`` merges the query string and the decoded body; ``status`` is what was answered.
    """

    name: str
    """The endpoint, as the platform names it."""
    method: str
    """The HTTP method."""
    path: str
    """The request's path."""
    params: dict[str, Any]
    """The query string and the decoded body, merged."""
    headers: dict[str, str]
    """The request's headers."""
    status: int = 0
    """The status the fake answered."""
    at: float = field(default_factory=time.monotonic)
    """When it came (``time.monotonic()``)."""


@dataclass
class Failure:
    """An injected failure: the next ``count`` calls of ``name`` answer ``status``."""

    name: str
    """The endpoint that fails."""
    status: int
    """The HTTP status it answers."""
    retry_after: float | None
    """The ``retry_after`` it asks for (a 429's), or None."""
    count: int
    """How many calls it fails."""
    description: str | None = None
    """The error's text, where the platform's errors carry one; None: the fake's own."""
    served: int = 0
    """How many failing answers were given so far."""
    code: str | None = None
    """The error's ``code`` where the platform's errors carry one (OpenAI: ``context_length_exceeded``)."""


class FakeServer:
    """Base of the fakes: server lifecycle, request log, failure injection and waiting.

    State that must outlive one server (Telegram restarts) lives in a plain ``state`` object;
    asyncio primitives live here, so a state can move to a new server on a new loop.
    """

    host = "127.0.0.1"
    """Where it listens: loopback only."""

    def __init__(self) -> None:
        self.port: int = 0
        """Its port: 0 until started on a free one (or set it before ``start`` for a fixed one)."""
        self.closing = False
        """True while it stops: a long poll or a wait sees it and returns."""
        self._runner: web.AppRunner | None = None
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []

    # -- subclass hooks -------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        raise NotImplementedError

    async def _before_cleanup(self) -> None:
        """Release long polls and websockets so shutdown takes milliseconds."""

    # -- state the subclass keeps in self.state ------------------------------------------

    @property
    def requests(self) -> list[Recorded]:
        """Every request received, in order."""
        return self.state.requests  # type: ignore[attr-defined]

    @property
    def sent(self) -> list[dict[str, Any]]:
        """Every message the bot sent, in order (dicts; fields per fake)."""
        return self.state.sent  # type: ignore[attr-defined]

    @property
    def failures(self) -> list[Failure]:
        """Injected failures, including the ones used up; ``served`` counts answers given."""
        return self.state.failures  # type: ignore[attr-defined]

    def _record_request(self, name: str, request: web.Request, params: dict[str, Any]) -> Recorded:
        """Log ``request`` as a call of ``name`` with ``params`` (in ``requests``); the record,
        whose ``status`` the answer sets."""
        rec = Recorded(name, request.method, request.path, params, dict(request.headers))
        self.requests.append(rec)
        return rec

    def calls(self, name: str) -> list[Recorded]:
        """The recorded requests of one endpoint, in order."""
        return [r for r in self.requests if r.name == name]

    def fail_next(
        self,
        name: str,
        *,
        status: int = 429,
        retry_after: float | None = 1,
        count: int = 1,
        description: str | None = None,
        code: str | None = None,
    ) -> Failure:
        """Make the next ``count`` calls of endpoint ``name`` answer ``status``.

        429s carry ``retry_after`` in the platform's shape; other statuses a generic error
        (or ``description``, and ``code`` where the platform's errors have one). Served
        failures are recorded with their request's status.
        """
        failure = Failure(
            name=name, status=status, retry_after=retry_after, count=count, description=description, code=code
        )
        self.failures.append(failure)
        return failure

    def _take_failure(self, name: str) -> Failure | None:
        for failure in self.failures:
            if failure.name == name and failure.served < failure.count:
                failure.served += 1
                return failure
        return None

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: point the client under test at it."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        """Serve on ``host`` (at ``port``, or a free one when it is 0); idempotent. ``async with`` starts
        and stops it."""
        if self._runner is not None:
            return
        self.closing = False
        # handler_cancellation: a client that hangs up (e.g. a cancelled long poll) cancels
        # its handler instead of leaving it to run out its timeout.
        self._runner = web.AppRunner(
            self._build_app(), handler_cancellation=True, shutdown_timeout=0.5, access_log=None
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if not self.port:
            self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        """Stop serving; the state stays for inspection (and for a new server)."""
        if self._runner is None:
            return
        self.closing = True
        self._notify()
        await self._before_cleanup()
        runner, self._runner = self._runner, None
        await runner.cleanup()
        for _, fut in self._waiters:
            if not fut.done():
                fut.cancel()
        self._waiters.clear()

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- waiting --------------------------------------------------------------------------

    def _notify(self) -> None:
        """Wake every waiter whose predicate now holds; call after each state change."""
        still = []
        for predicate, fut in self._waiters:
            if fut.done():
                continue
            if predicate():
                fut.set_result(None)
            else:
                still.append((predicate, fut))
        self._waiters = still

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 5) -> None:
        """Wait until ``predicate()`` holds (checked on every request and state change).

        Raises:
            TimeoutError: it did not hold within ``timeout`` seconds.
        """
        if predicate():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, fut))
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise TimeoutError(f"{type(self).__name__}: condition not met in {timeout}s") from None

    async def wait_sent(self, n: int, timeout: float = 5) -> list[dict[str, Any]]:
        """Wait until at least ``n`` messages were sent; returns ``sent``."""
        try:
            await self.wait_for(lambda: len(self.sent) >= n, timeout)
        except TimeoutError:
            raise TimeoutError(
                f"{type(self).__name__}: {len(self.sent)} of {n} messages sent in {timeout}s: {self.sent!r}"
            ) from None
        return self.sent

    async def wait_calls(self, name: str, n: int = 1, timeout: float = 5) -> list[Recorded]:
        """Wait until endpoint ``name`` was called at least ``n`` times."""
        await self.wait_for(lambda: len(self.calls(name)) >= n, timeout)
        return self.calls(name)

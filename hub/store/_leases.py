"""Leases: which worker runs a listener that must be unique (a poller, a shard, a webhook's set-up).

Several ``hub run`` workers can share one store. A platform listener that must run once
(Telegram's ``getUpdates`` loop, the X mention poller) runs only on the worker that holds
its lease; the others stand by and take over once it is released or has expired.

A `LeaseStore` keeps one row per lease: its holder, when it expires, and a fencing
``token`` that grows each time the lease is taken anew (so work done under an old holding
can be told apart). Taking a lease is one conditional UPSERT (free, expired, or already
ours), never read-then-write, so two workers racing for it cannot both win. Times come from
the store's injected clock (wall time: workers on several machines compare expiries).

A [`LeaseKeeper`][hub.platform.LeaseKeeper] holds one lease for its owner:
[`LeaseKeeper.hold()`][hub.platform.LeaseKeeper.hold] waits for
the lease, runs the owner's work while it is held, renews it in the background, and cancels
the work as soon as the lease is lost (a renewal refused, or not confirmed before expiry).

The worker's identity (`worker_id()`) is host, pid and a random suffix, so two hubs in
one process are two holders.
The backends: `hub.store.InMemoryLeaseStore` (the hubs of one process) and
`hub.store.sql.SqlLeaseStore` (the workers sharing a database), in
hub/store/_in_memory.py and hub/store/sql/_stores.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..errors import HubError, RunError

__all__ = ["Clock", "Lease", "LeaseStore", "LeaseKeeper", "check_lease", "worker_id", "sole_worker_id"]

log = logging.getLogger("hub.store")

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


def worker_id() -> str:
    """This worker's identity as a lease holder: ``HOST:PID:RANDOM``."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def sole_worker_id(data_dir: str | os.PathLike[str]) -> str:
    """The holder of a process that holds the data dir's lock (``hub run`` on SQLite): no
    other process can share the store, so each run there is the same holder and takes its
    leases back at once after a crash, instead of waiting for them to expire."""
    return f"sole:{os.path.realpath(data_dir)}"


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease as held: ``expires`` is the store clock's time, ``token`` the fencing token
    (it grows each time the lease is taken by a holder that did not hold it a moment ago)."""

    name: str
    """The lease's name."""
    holder: str
    """Who holds it."""
    expires: float
    """When the holding ends unless renewed, on the store's clock."""
    token: int
    """The fencing token: it grows each time a holder that did not just hold it takes the lease."""


def check_lease(name: str, holder: str, ttl: float | None = None) -> None:
    """Every lease store's check of its arguments (a name, a holder, a positive ttl).

    Raises:
        RunError: one of them is missing or wrong (the message names the lease).
    """
    if not name:
        raise RunError("a lease needs a name")
    if not holder:
        raise RunError(f"lease {name!r}: the holder must not be empty")
    if ttl is not None and not ttl > 0:
        raise RunError(f"lease {name!r}: ttl must be positive seconds, not {ttl!r}")


class LeaseStore(ABC):
    """Named leases with expiry. Every method is atomic against other workers on the store.

    ``clock`` gives the time (Unix seconds) every expiry is compared with.
    """

    clock: Clock

    @abstractmethod
    async def acquire(self, name: str, holder: str, ttl: float) -> Lease | None:
        """Take the lease for ``ttl`` seconds if it is free, expired or already ``holder``'s
        (then it is extended); None when another holder has it."""

    @abstractmethod
    async def renew(self, name: str, holder: str, ttl: float) -> Lease | None:
        """Extend ``holder``'s unexpired lease to ``ttl`` seconds from now; None when it is
        not (or no longer) theirs: expired leases are not renewed, they are acquired again."""

    @abstractmethod
    async def release(self, name: str, holder: str) -> bool:
        """Give the lease up (others may take it at once); False when it was not ``holder``'s."""

    @abstractmethod
    async def holder(self, name: str) -> Lease | None:
        """The lease as currently held, or None when it is free or expired."""

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass


# --- the keeper -------------------------------------------------------------------------


class LeaseKeeper:
    """Holds one lease for its owner and runs the owner's work only while it is held.

    ``ttl`` is how long a holding lasts without renewal (how long a dead worker's listener
    stays unowned); it is renewed every ``ttl / 3`` seconds, and a worker without it tries
    again every ``retry`` seconds (default ``ttl / 3``). ``on_change(held)`` is called when
    the lease is won or lost. ``sleep`` is swappable for tests.

    Attributes:
        store: The lease store it asks.
        name: The lease's name (one per listener that must run once).
        holder: Who holds it when held: this worker's identity.
        ttl: Seconds a holding lasts without renewal.
        renew_every: Seconds between renewals (``ttl / 3``).
        retry: Seconds between tries while another worker holds it.
        sleep: How it waits (a fake one in tests).
        lease: The lease while held, else None.
    """

    def __init__(
        self,
        store: LeaseStore,
        name: str,
        holder: str,
        *,
        ttl: float = 30.0,
        retry: float | None = None,
        on_change: Callable[[bool], None] | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        check_lease(name, holder, ttl)
        self.store = store
        self.name = name
        self.holder = holder
        self.ttl = ttl
        self.renew_every = ttl / 3
        self.retry = retry if retry is not None else ttl / 3
        self.sleep = sleep
        self._on_change = on_change
        self.lease: Lease | None = None

    @property
    def held(self) -> bool:
        """Whether this worker holds the lease now."""
        return self.lease is not None

    def _set(self, lease: Lease | None) -> None:
        was = self.lease is not None
        self.lease = lease
        if was != (lease is not None) and self._on_change is not None:
            self._on_change(lease is not None)

    async def acquire(self) -> Lease:
        """Wait until the lease is ours (trying every ``retry`` seconds)."""
        told = None
        while True:
            try:
                lease = await self.store.acquire(self.name, self.holder, self.ttl)
            except HubError as e:
                log.warning(
                    "lease %s: cannot reach the lease store (%s); trying again in %.0fs", self.name, e, self.retry
                )
                lease = None
            if lease is not None:
                log.info("lease %s: held by this worker (%s, token %d)", self.name, self.holder, lease.token)
                self._set(lease)
                return lease
            other = await self._current()
            if other is not None and other != told:
                log.info("lease %s: held by %s; standing by", self.name, other)
                told = other
            await self.sleep(self.retry)

    async def _current(self) -> str | None:
        try:
            lease = await self.store.holder(self.name)
        except HubError:
            return None
        return lease.holder if lease is not None else None

    async def keep(self) -> None:
        """Renew the lease until it is lost; returns when it is (never while it is held)."""
        while self.lease is not None:
            await self.sleep(self.renew_every)
            lease = self.lease
            try:
                renewed = await self.store.renew(self.name, self.holder, self.ttl)
            except HubError as e:
                # the holding is ours until it expires: keep trying until then, not after
                if self.store.clock() + self.renew_every < lease.expires:
                    log.warning("lease %s: renewal failed (%s); trying again", self.name, e)
                    continue
                log.error("lease %s: renewal failed (%s) and the lease is about to expire: given up", self.name, e)
                renewed = None
            if renewed is None:
                log.warning("lease %s: lost (another worker holds it now, or it expired)", self.name)
            self._set(renewed)

    async def release(self) -> None:
        """Give the lease up now, if held (best effort: otherwise it expires)."""
        if self.lease is None:
            return
        self._set(None)
        try:
            await self.store.release(self.name, self.holder)
        except HubError as e:
            log.warning("lease %s: could not release it (%s); it expires within %.0fs", self.name, e, self.ttl)

    async def hold(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work()`` whenever the lease is held, until cancelled.

        Waits for the lease, starts ``work``, renews the lease meanwhile, and cancels
        ``work`` the moment the lease is lost; then waits for it again. When ``work``
        returns or raises, the lease is released and this returns (or raises) with it.
        Cancelling this cancels the work and releases the lease.
        """
        while True:
            await self.acquire()
            worker = asyncio.ensure_future(work())
            keeper = asyncio.ensure_future(self.keep())
            try:
                await asyncio.wait({worker, keeper}, return_when=asyncio.FIRST_COMPLETED)
                finished = worker.done()  # the work ended by itself (not because the lease went)
            finally:
                worker.cancel()
                keeper.cancel()
                await asyncio.gather(worker, keeper, return_exceptions=True)
                await self.release()
            if keeper.done() and not keeper.cancelled() and keeper.exception() is not None:
                log.error("lease %s: renewing failed; the work stopped", self.name, exc_info=keeper.exception())
            if finished:
                worker.result()  # raises what the work raised
                return
            log.info("lease %s: lost; the work stopped until this worker holds it again", self.name)

"""The inbox: every input is recorded before it is acknowledged, and marked done when handled.

This is what makes "no message lost, none answered twice" hold across a SIGKILL: a platform
extension records a message (with its platform id) before it confirms it to the platform;
a redelivered platform id is refused; at boot, inputs of runs that died before answering
are taken again.

A poison input (one whose run fails, or kills the process, every time) must not wedge its
conversation: each failed run is counted once per input (`InboxStore.failed()`), and at
``[hub] dead_letter_after`` failures the input is *parked* with its last error. Parked
inputs are not resumed; ``hub inbox`` lists them, ``hub inbox retry ID`` puts one back and
``hub inbox drop ID`` gives it up.

The backends: `hub.store.InMemoryInbox` (hub/store/_in_memory.py) and the SQL ones
(hub/store/sql/_inbox.py): one process's on SQLite, the workers' shared one on PostgreSQL.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..logs import InputLog

if TYPE_CHECKING:
    from ._run_records import RunStore

__all__ = ["InboxStore", "Pending", "Parked", "park_poison"]

log = logging.getLogger("hub.store")


@dataclass(slots=True)
class Pending:
    """An input recorded but not yet handled, and the run that took it (if any)."""

    context: str
    entry: InputLog
    run_id: str | None


@dataclass(slots=True)
class Parked:
    """An input given up on after ``failures`` failed runs, with the last one's error."""

    context: str
    entry: InputLog
    failures: int
    error: str
    run_id: str | None


class InboxStore(ABC):
    @abstractmethod
    async def record(self, context: str, entry: InputLog) -> bool:
        """Record an input durably. False if its ``platform_id`` was recorded before (a redelivery)."""

    @abstractmethod
    def take(self, ids: list[str], run_id: str) -> None:
        """Mark inputs as taken by a run (not yet done)."""

    @abstractmethod
    async def done(self, ids: list[str]) -> None:
        """Mark inputs handled; durable when it returns."""

    @abstractmethod
    async def pending(self) -> list[Pending]:
        """Inputs recorded but neither done nor parked, oldest first."""

    @abstractmethod
    async def seen(self, platform_id: str) -> bool: ...

    async def claim(self) -> list[Pending]:
        """The pending inputs this worker takes on (at start, and from dead workers later),
        oldest first. With one process that is every pending input; where several workers
        share the inbox (`hub.store.sql.PostgresInbox`) only those no live worker holds."""
        return await self.pending()

    async def renew(self) -> int:
        """Extend this worker's leases on the inputs it holds; how many (0 without leases)."""
        return 0

    async def hold(self, ids: list[str]) -> list[str]:
        """Of ``ids`` (inputs this worker queued), those it still holds and may answer now;
        called under the conversation's lock, just before a run takes them. With one process
        that is all of them; where workers share the inbox (`hub.store.sql.PostgresInbox`)
        an input whose lease lapsed and that another worker claimed, or that a run already
        answered, is left out: it is that worker's to answer, or answered."""
        return list(ids)

    async def oldest_elsewhere(self, context: str, ids: list[str]) -> float | None:
        """When the oldest of ``context``'s unanswered inputs other than ``ids`` (those queued
        for the run about to start) was received; None when there is none (always, with one
        process). Called under the conversation's lock, so such an input is queued on another
        worker, a dead worker's, or being claimed here: the run answers only inputs older
        than it, so that a conversation's replies keep the order of its messages."""
        return None

    @abstractmethod
    async def failed(self, ids: list[str], run_id: str, error: str, *, park_after: int) -> list[str]:
        """Count a failed run ``run_id`` against each input (once per run, however often
        this is called for it), parking those with ``park_after`` failures; returns the ids
        parked now. Durable when it returns."""

    @abstractmethod
    async def park(self, context: str, entry: InputLog, error: str, *, failures: int) -> bool:
        """Record ``entry`` parked at once, with ``failures`` and its ``error``: a platform
        update the extension could not take (it fails every time), kept for ``hub inbox``
        instead of blocking intake or being lost. False if its ``platform_id`` is known.
        Durable when it returns."""

    @abstractmethod
    async def parked(self) -> list[Parked]:
        """Parked inputs, oldest first."""

    @abstractmethod
    async def retry(self, input_id: str) -> bool:
        """A parked input is pending again, its failures forgotten. False if none is parked with that id."""

    @abstractmethod
    async def drop(self, input_id: str) -> bool:
        """A parked input is given up (marked done). False if none is parked with that id."""

    @abstractmethod
    async def forget_user(self, user: str, *, platform: str) -> int:
        """Erase ``user``'s inputs in the platform's conversations (``hub memory forget
        --person``): a handled one keeps only its platform id (a redelivery is still
        recognised), one not yet handled is dropped. Returns how many were touched."""

    async def find(self, prefix: str) -> str | None:
        """The id of the one input whose id starts with ``prefix`` (as ``hub inbox`` prints it),
        or None when none or several do. This default looks among the pending and parked ones."""
        ids = {p.entry.id for p in await self.pending()} | {p.entry.id for p in await self.parked()}
        found = [i for i in ids if i.startswith(prefix)]
        return found[0] if len(found) == 1 else None

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass


async def park_poison(inbox: InboxStore, runs: RunStore, p: Pending, *, park_after: int) -> bool:
    """At start, before a pending input is resumed: if the run that last took it failed (or
    died with the process), count that against it; True if it is now parked."""
    if p.run_id is None:
        return False
    run = await runs.get(p.run_id)
    if run is None or not (run.state == "failed" or (run.state == "killed" and run.reason == "abnormal_exit")):
        return False  # still running elsewhere, or stopped by a shutdown: not the input's fault
    if run.store_failed:
        return False  # the store failed, not the input: it is retried as often as it takes
    error = f"run {run.id[:8]} {run.state}: {run.reason}"
    if not await inbox.failed([p.entry.id], run.id, error, park_after=park_after):
        return False
    log.warning(
        "inbox: input %s for %s parked after %d failed runs (last: %s); `hub inbox` lists it, "
        "`hub inbox retry %s` resumes it",
        p.entry.id[:8],
        p.context,
        park_after,
        error,
        p.entry.id[:8],
    )
    return True

"""The backend, chosen once: `open_stores()` gives every store of a hub over one database.

SQLite in ``data_dir`` (``[store] url`` empty, the default), or PostgreSQL at ``[store] url``,
which several ``hub run`` workers share. The hub and the command line (``hub runs``, ``hub
inbox``, ``hub pairing``, ...) all get their stores here, so they agree; nothing else asks
which backend it is on.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import HubError
from ._approvals import ApprovalStore
from ._datadir import DataDirLock, check_database
from ._history import HistoryStore, InMemoryHistoryStore
from ._in_memory import (
    InMemoryApprovalStore,
    InMemoryLeaseStore,
    InMemoryPairingStore,
    InMemoryReviewStore,
    InMemoryRevisionStore,
    InMemoryScheduleStore,
    InMemoryStopStore,
    InMemoryUsageStore,
)
from ._inbox import InboxStore
from ._leases import LeaseStore, sole_worker_id, worker_id
from ._memory import MemoryStore
from ._pairings import PairingStore
from ._reminders import InMemoryReminderStore, ReminderStore
from ._reviews import ReviewStore
from ._revisions import RevisionStore
from ._run_records import RunStore
from ._schedules import ScheduleStore
from ._stops import StopStore
from ._usage import UsageStore
from .sql import (
    Database,
    PgDatabase,
    PostgresHistoryStore,
    PostgresInbox,
    PostgresRunStore,
    SqlApprovalStore,
    SqlDatabase,
    SqlHistoryStore,
    SqlInbox,
    SqlLeaseStore,
    SqlMemoryStore,
    SqlPairingStore,
    SqlReminderStore,
    SqlReviewStore,
    SqlRevisionStore,
    SqlRunStore,
    SqlScheduleStore,
    SqlStopStore,
    SqlUsageStore,
    inspect,
)

if TYPE_CHECKING:
    from ..config import HubConfig

__all__ = [
    "ConversationLock",
    "Stores",
    "claim_data_dir",
    "has_database",
    "inspect_store",
    "open_stores",
    "sole_worker",
]

ConversationLock = Callable[[str], AbstractAsyncContextManager[Any]]
"""Held around each run of a conversation, so that it runs on one worker at a time."""


@dataclass(slots=True)
class Stores:
    """Every store of a hub and the database they share (None: all in memory).

    Built by `open_stores()`, not yet open: ``await stores.open()`` (the hub does at
    start), or ``async with open_stores(config) as stores``. ``lock`` is set where workers
    share the stores (PostgreSQL): the conversation lock a run holds, and the sign that the
    inbox's claims are kept and a dead worker's are taken over.
    """

    db: SqlDatabase | None
    runs: RunStore
    inbox: InboxStore
    memory: MemoryStore
    leases: LeaseStore
    usage: UsageStore
    schedules: ScheduleStore
    revisions: RevisionStore
    pairings: PairingStore
    lock: ConversationLock | None = None
    stops: StopStore = field(default_factory=InMemoryStopStore)
    """Stop requests, polled by the worker holding each run (hub/features/_stops.py)."""
    approvals: ApprovalStore = field(default_factory=InMemoryApprovalStore)
    """Questions runs wait on before an action (hub/features/_approvals.py)."""
    reminders: ReminderStore = field(default_factory=InMemoryReminderStore)
    """Reminders set in conversations (hub/features/_reminders.py)."""
    history: HistoryStore = field(default_factory=InMemoryHistoryStore)
    """Messages indexed for search (hub/features/_history.py)."""
    reviews: ReviewStore = field(default_factory=InMemoryReviewStore)
    """Posts held for an operator (``review = true`` on a public timeline; ``hub review``)."""

    @property
    def shared(self) -> bool:
        """Whether several workers share these stores (each run holds `lock`)."""
        return self.lock is not None

    def _all(self) -> tuple[Any, ...]:
        return (
            self.memory,
            self.runs,
            self.inbox,
            self.leases,
            self.usage,
            self.schedules,
            self.revisions,
            self.pairings,
            self.stops,
            self.approvals,
            self.reminders,
            self.history,
            self.reviews,
        )

    async def open(self) -> Stores:
        """Open every store (and so the database, once).

        Raises:
            StoreError: the database cannot be opened (the message says where and why).
        """
        for store in self._all():
            await store.open()
        return self

    async def close(self) -> None:
        """Close every store, then the database: what was queued is committed first."""
        for store in reversed(self._all()):
            await store.close()
        if self.db is not None:
            await self.db.close()

    async def __aenter__(self) -> Stores:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def open_stores(
    config: HubConfig,
    *,
    worker: str | None = None,
    missing: str | None = None,
    memory: MemoryStore | None = None,
    runs: RunStore | None = None,
    inbox: InboxStore | None = None,
    leases: LeaseStore | None = None,
) -> Stores:
    """The stores ``config`` asks for, over one database (see `Stores` to open them).

    With ``[store] url`` they are PostgreSQL's, shared by workers: the run store recovers only
    runs no live worker holds, and the inbox holds the inputs it takes on for ``worker`` (this
    process among the workers; a new name when None) for ``[store] lease`` seconds at a time.
    Otherwise they are SQLite's, in ``data_dir/hub.db``, one process's.

    The stores given replace the config's (tests); given ``memory``, ``runs`` and ``inbox``
    alike, no database is opened and every other store is in memory. ``missing`` is for a
    command that reads what a hub wrote: with SQLite the database must exist already.

    Raises:
        HubError: ``missing`` is given and there is no ``hub.db`` yet (``missing`` says what
            that means to the command).
    """
    if memory is not None and runs is not None and inbox is not None:
        return Stores(
            None,
            runs=runs,
            inbox=inbox,
            memory=memory,
            leases=leases if leases is not None else InMemoryLeaseStore(),
            usage=InMemoryUsageStore(),
            schedules=InMemoryScheduleStore(),
            revisions=InMemoryRevisionStore(),
            pairings=InMemoryPairingStore(),
        )
    s = config.store
    db: SqlDatabase
    lock: ConversationLock | None
    if s.url:  # workers share it: what only PostgreSQL can do is chosen here, once
        pg = PgDatabase(
            s.url, pool_size=s.pool_size, lock_connections=s.lock_connections, connect_timeout=s.connect_timeout
        )
        db, lock = pg, pg.lock
        runs = runs if runs is not None else PostgresRunStore(pg)
        inbox = inbox if inbox is not None else PostgresInbox(pg, worker=worker or worker_id(), lease=s.lease)
    else:
        path = config.data_dir / "hub.db"
        if missing is not None and not path.exists():
            raise HubError(f"{missing}: {path} does not exist")
        db, lock = Database(path), None
        runs = runs if runs is not None else SqlRunStore(db)
        inbox = inbox if inbox is not None else SqlInbox(db)
    return Stores(
        db,
        runs=runs,
        inbox=inbox,
        memory=memory if memory is not None else SqlMemoryStore(db),
        leases=leases if leases is not None else SqlLeaseStore(db),
        usage=SqlUsageStore(db),
        schedules=SqlScheduleStore(db),
        revisions=SqlRevisionStore(db),
        pairings=SqlPairingStore(db),
        lock=lock,
        stops=SqlStopStore(db),
        approvals=SqlApprovalStore(db),
        reminders=SqlReminderStore(db),
        history=PostgresHistoryStore(db) if s.url else SqlHistoryStore(db),
        reviews=SqlReviewStore(db),
    )


def claim_data_dir(config: HubConfig, *, allow_empty: bool = False) -> DataDirLock:
    """Take the data dir's lock for a process that runs the hub (``hub run``, ``hub chat``):
    one such process per data dir. With SQLite the database there is checked too, before the
    stores open (`check_database()`); with PostgreSQL, which many workers share, the lock
    still guards what stays in the data dir (embedded Chroma, the heartbeat, the training
    file), so workers on one machine each get their own.

    Raises:
        DataDirInUse: another process holds it.
        DatabaseRefused: the SQLite database is damaged, or empty where a hub ran before.
    """
    lock = DataDirLock(config.data_dir).acquire()
    if config.store.url:
        return lock
    try:
        check_database(config.data_dir, allow_empty=allow_empty, lock=lock)
    except HubError:
        lock.release()
        raise
    return lock


def sole_worker(config: HubConfig) -> str | None:
    """The worker name of a process holding the data dir's lock (`claim_data_dir()`) where
    that makes it the only worker there can be (SQLite): the same name on every start, so a
    restart after a crash takes its leases back at once. None where workers share the store
    (PostgreSQL, each with a data dir of its own, maybe at the same path on another machine):
    each needs a name of its own."""
    return None if config.store.url else sole_worker_id(config.data_dir)


def has_database(config: HubConfig) -> bool:
    """Whether a hub may have written state for ``config`` (always, with PostgreSQL: the server
    is not asked; with SQLite, once ``data_dir/hub.db`` exists)."""
    return bool(config.store.url) or (config.data_dir / "hub.db").exists()


async def inspect_store(config: HubConfig) -> str:
    """Where the state lives and what is there, in one line, changing nothing (``hub check``):
    the SQLite file, or the PostgreSQL server, schema and counts at ``[store] url``.

    Raises:
        StoreError: PostgreSQL cannot be reached, or asyncpg is missing.
    """
    if config.store.url:
        return await inspect(config.store.url, timeout=config.store.connect_timeout)
    return f"SQLite {config.data_dir / 'hub.db'}"

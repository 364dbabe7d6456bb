"""Everything the hub keeps, as aiogram's storages are built: one base per store (its seam and
data types), one module per backend (in memory here, SQL in :mod:`hub.store.sql`), and the
backend chosen once (:func:`open_stores`). Besides the stores: retention, store health and
the data dir's lock (the sweep of workers' inbox claims is :class:`hub.engine.Intake`'s).

The seams: runs (``_run_records``), the inbox (``_inbox``), leases (``_leases``), key-value
memory (``_memory``), usage in tokens and money (``_usage``), stop requests (``_stops``),
schedule ticks (``_schedules``), persona revisions (``_revisions``), pairings (``_pairings``) and held posts (``_reviews``).
"""

from __future__ import annotations

from ._backend import (
    ConversationLock,
    Stores,
    claim_data_dir,
    has_database,
    inspect_store,
    open_stores,
    sole_worker,
)
from ._datadir import DataDirLock, check_database
from ._health import StoreCollector, StoreHealth, databases
from ._in_memory import (
    InMemoryInbox,
    InMemoryLeaseStore,
    InMemoryPairingStore,
    InMemoryReviewStore,
    InMemoryRevisionStore,
    InMemoryRunStore,
    InMemoryScheduleStore,
    InMemoryStopStore,
    InMemoryStore,
    InMemoryUsageStore,
)
from ._inbox import InboxStore, Parked, Pending, park_poison
from ._leases import Lease, LeaseKeeper, LeaseStore, sole_worker_id, worker_id
from ._memory import MemoryStore
from ._merge import merge3
from ._pairings import Pairing, PairingStore
from ._redacting import RedactingRunStore
from ._retention import Retention, prune
from ._reviews import REVIEW_MOVES, Review, ReviewRefused, ReviewState, ReviewStore
from ._revisions import Revision, RevisionStore
from ._run_records import RunRecord, RunState, RunStore, RunTotals, collect_tree, preview, search_needle
from ._schedules import ScheduleStore, Tick
from ._stops import StopStore
from ._upkeep import PAIRING_GRACE, Upkeep, prune_pairings
from ._usage import UsageStore

__all__ = [
    "ConversationLock",
    "DataDirLock",
    "InMemoryInbox",
    "InMemoryLeaseStore",
    "InMemoryPairingStore",
    "InMemoryReviewStore",
    "InMemoryRevisionStore",
    "InMemoryRunStore",
    "InMemoryScheduleStore",
    "InMemoryStopStore",
    "InMemoryStore",
    "InMemoryUsageStore",
    "InboxStore",
    "Lease",
    "LeaseKeeper",
    "LeaseStore",
    "MemoryStore",
    "Pairing",
    "PairingStore",
    "Parked",
    "Pending",
    "RedactingRunStore",
    "Retention",
    "Upkeep",
    "PAIRING_GRACE",
    "prune_pairings",
    "REVIEW_MOVES",
    "Review",
    "ReviewRefused",
    "ReviewState",
    "ReviewStore",
    "Revision",
    "RevisionStore",
    "RunRecord",
    "RunTotals",
    "preview",
    "search_needle",
    "RunState",
    "RunStore",
    "ScheduleStore",
    "StoreCollector",
    "StopStore",
    "StoreHealth",
    "Stores",
    "Tick",
    "UsageStore",
    "check_database",
    "claim_data_dir",
    "collect_tree",
    "databases",
    "has_database",
    "inspect_store",
    "open_stores",
    "park_poison",
    "merge3",
    "prune",
    "sole_worker",
    "sole_worker_id",
    "worker_id",
]

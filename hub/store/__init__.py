"""Everything the hub keeps, as aiogram's storages are built: one base per store (its seam and
data types), one module per backend (in memory here, SQL in `hub.store.sql`), and the
backend chosen once (`open_stores()`). Besides the stores: retention, store health and
the data dir's lock (the sweep of workers' inbox claims is `hub.engine.Intake`'s).

The seams: runs (``_run_records``), the inbox (``_inbox``), leases (``_leases``), key-value
memory (``_memory``), usage in tokens and money (``_usage``), stop requests (``_stops``),
schedule ticks (``_schedules``), persona revisions (``_revisions``), pairings (``_pairings``),
approvals (``_approvals``) and held posts (``_reviews``).
"""

from __future__ import annotations

from ._approvals import Approval, ApprovalState, ApprovalStore, approval_key
from ._backend import (
    ConversationLock,
    Stores,
    claim_data_dir,
    has_database,
    inspect_store,
    open_stores,
    sole_worker,
)
from ._conversations import CONVERSATION_PREFIXES, FORGOTTEN_PREFIXES, Forgotten, Generation
from ._datadir import DataDirLock, check_database
from ._erase import Erased, erase_person, finish_forgetting
from ._health import StoreCollector, StoreHealth, databases
from ._history import HistoryEntry, HistoryHit, HistoryStore, InMemoryHistoryStore, search_terms
from ._in_memory import (
    InMemoryApprovalStore,
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
from ._merge import Counters, counter_paths, merge3
from ._pairings import Pairing, PairingStore
from ._people import FORGETTING, LINK_ATTEMPTS, LINK_CODE_TTL, LinkError, LinkResult, People
from ._redacting import RedactingRunStore
from ._reminders import InMemoryReminderStore, Reminder, ReminderStore
from ._retention import Retention, prune
from ._reviews import REVIEW_MOVES, Approved, Listening, Review, ReviewRefused, ReviewState, ReviewStore
from ._revisions import Revision, RevisionStore
from ._run_records import (
    FORGOTTEN,
    RunRecord,
    RunState,
    RunStore,
    RunTotals,
    collect_tree,
    forgotten_input,
    preview,
    search_needle,
)
from ._schedules import ScheduleStore, Tick
from ._stops import StopStore
from ._upkeep import PAIRING_GRACE, Upkeep, prune_pairings
from ._usage import UsageStore

__all__ = [
    "Erased",
    "FORGETTING",
    "FORGOTTEN",
    "erase_person",
    "finish_forgetting",
    "forgotten_input",
    "Approval",
    "ApprovalState",
    "ApprovalStore",
    "InMemoryApprovalStore",
    "approval_key",
    "CONVERSATION_PREFIXES",
    "ConversationLock",
    "FORGOTTEN_PREFIXES",
    "Forgotten",
    "Generation",
    "Counters",
    "counter_paths",
    "DataDirLock",
    "HistoryEntry",
    "HistoryHit",
    "HistoryStore",
    "InMemoryHistoryStore",
    "InMemoryInbox",
    "InMemoryLeaseStore",
    "InMemoryPairingStore",
    "InMemoryReminderStore",
    "InMemoryReviewStore",
    "InMemoryRevisionStore",
    "InMemoryRunStore",
    "InMemoryScheduleStore",
    "InMemoryStopStore",
    "InMemoryStore",
    "InMemoryUsageStore",
    "InboxStore",
    "Lease",
    "Listening",
    "Approved",
    "LeaseKeeper",
    "LeaseStore",
    "MemoryStore",
    "Pairing",
    "People",
    "LinkError",
    "LinkResult",
    "LINK_ATTEMPTS",
    "LINK_CODE_TTL",
    "PairingStore",
    "Parked",
    "Pending",
    "RedactingRunStore",
    "Reminder",
    "ReminderStore",
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
    "search_terms",
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

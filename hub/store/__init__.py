"""Everything the hub keeps: runs and their events, the inbox, leases and claims, key-value memory, retention, store health, the data dir and the choice of backend."""

from __future__ import annotations

from ._backend import database_for, existing_database, run_store
from ._datadir import DataDirLock, check_database
from ._health import StoreCollector, StoreHealth, databases
from ._inbox import InboxStore, InMemoryInbox, Pending, PostgresInbox, SQLiteInbox, park_poison
from ._leases import (
    InMemoryLeaseStore,
    Lease,
    LeaseKeeper,
    LeaseStore,
    PostgresLeaseStore,
    SQLiteLeaseStore,
    sole_worker_id,
    worker_id,
)
from ._memory import InMemoryStore, MemoryStore
from ._redacting import RedactingRunStore
from ._retention import Retention, prune
from ._run_records import (
    InMemoryRunStore,
    PostgresRunStore,
    RunRecord,
    RunState,
    RunStore,
    SQLiteRunStore,
    collect_tree,
)
from ._sql_memory import PostgresMemoryStore, SQLiteMemoryStore

__all__ = [
    "DataDirLock",
    "InMemoryInbox",
    "InMemoryLeaseStore",
    "InMemoryRunStore",
    "InMemoryStore",
    "InboxStore",
    "Lease",
    "LeaseKeeper",
    "LeaseStore",
    "MemoryStore",
    "Pending",
    "PostgresInbox",
    "PostgresLeaseStore",
    "PostgresMemoryStore",
    "PostgresRunStore",
    "RedactingRunStore",
    "Retention",
    "RunRecord",
    "RunState",
    "RunStore",
    "SQLiteInbox",
    "SQLiteLeaseStore",
    "SQLiteMemoryStore",
    "SQLiteRunStore",
    "StoreCollector",
    "StoreHealth",
    "check_database",
    "collect_tree",
    "database_for",
    "databases",
    "existing_database",
    "park_poison",
    "prune",
    "run_store",
    "sole_worker_id",
    "worker_id",
]

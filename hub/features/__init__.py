"""Features that take part in runs through the hook protocol: budgets, roles, metrics, child runs, schedules, the heartbeat and private access."""

from __future__ import annotations

from ._access import (
    POLICIES,
    Access,
    Decision,
    InMemoryPairingStore,
    Pairing,
    PairingError,
    PairingStore,
    PostgresPairingStore,
    SQLitePairingStore,
)
from ._budgets import Budgets, InMemoryUsageStore, PostgresUsageStore, SQLiteUsageStore, UsageStore, utc_day
from ._children import ORPHANED, ChildRuns
from ._heartbeat import Heartbeat
from ._metrics import CONTENT_TYPE, Metrics
from ._roles import RoleGuard
from ._schedules import (
    InMemoryScheduleStore,
    PostgresScheduleStore,
    Scheduler,
    ScheduleStore,
    SQLiteScheduleStore,
    next_fire,
    tick_id,
)

__all__ = [
    "Access",
    "Budgets",
    "CONTENT_TYPE",
    "ChildRuns",
    "Decision",
    "Heartbeat",
    "InMemoryPairingStore",
    "InMemoryScheduleStore",
    "InMemoryUsageStore",
    "Metrics",
    "ORPHANED",
    "POLICIES",
    "Pairing",
    "PairingError",
    "PairingStore",
    "PostgresPairingStore",
    "PostgresScheduleStore",
    "PostgresUsageStore",
    "RoleGuard",
    "SQLitePairingStore",
    "SQLiteScheduleStore",
    "SQLiteUsageStore",
    "ScheduleStore",
    "Scheduler",
    "UsageStore",
    "next_fire",
    "tick_id",
    "utc_day",
]

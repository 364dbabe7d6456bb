"""The SQL backend: the databases (SQLite, PostgreSQL), their migrations and the group commit
they share, and every store's SQL on them. One class a store serves both databases; the
inbox and the run store have a PostgreSQL class of their own, for workers sharing it."""

from __future__ import annotations

from ._approvals import SqlApprovalStore
from ._conversations import prune_conversations
from ._history import PostgresHistoryStore, SqlHistoryStore
from ._inbox import PostgresInbox, SqlInbox
from ._migrations import SCHEMA_VERSION
from ._postgres import PgDatabase, inspect
from ._reminders import SqlReminderStore
from ._runs import PostgresRunStore, SqlRunStore
from ._sql_store import SqlStore
from ._sqlite import INLINE_MAX, Database, SqlDatabase
from ._stores import (
    SqlLeaseStore,
    SqlMemoryStore,
    SqlPairingStore,
    SqlReviewStore,
    SqlRevisionStore,
    SqlScheduleStore,
    SqlStopStore,
    SqlUsageStore,
)
from ._values import dumps

__all__ = [
    "Database",
    "INLINE_MAX",
    "PgDatabase",
    "PostgresHistoryStore",
    "PostgresInbox",
    "PostgresRunStore",
    "SCHEMA_VERSION",
    "SqlApprovalStore",
    "SqlDatabase",
    "SqlHistoryStore",
    "SqlInbox",
    "SqlLeaseStore",
    "SqlMemoryStore",
    "SqlPairingStore",
    "SqlReminderStore",
    "SqlReviewStore",
    "SqlRevisionStore",
    "SqlRunStore",
    "SqlScheduleStore",
    "SqlStopStore",
    "SqlStore",
    "SqlUsageStore",
    "dumps",
    "inspect",
    "prune_conversations",
]

"""Features that take part in runs through the hook protocol: budgets, roles, metrics, child runs, schedules, the heartbeat and private access."""

from __future__ import annotations

from ._access import POLICIES, Access, Decision, PairingError
from ._budgets import Budgets, utc_day
from ._children import ORPHANED, ChildRuns
from ._heartbeat import Heartbeat
from ._metrics import CONTENT_TYPE, Metrics
from ._roles import RoleGuard
from ._schedules import Scheduler, next_fire, tick_id

__all__ = [
    "Access",
    "Budgets",
    "CONTENT_TYPE",
    "ChildRuns",
    "Decision",
    "Heartbeat",
    "Metrics",
    "ORPHANED",
    "POLICIES",
    "PairingError",
    "RoleGuard",
    "Scheduler",
    "next_fire",
    "tick_id",
    "utc_day",
]

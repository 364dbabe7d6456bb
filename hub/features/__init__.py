"""Features that take part in runs through the hook protocol: approvals, budgets, the background spend, the failure reply, stopping a run, roles, metrics, child runs, schedules, reminders, the message history, the heartbeat and private access."""

from __future__ import annotations

from ._access import POLICIES, Access, Decision, PairingError
from ._approvals import OPERATOR, Approvals
from ._background import BACKGROUND_SCOPE, BACKGROUND_TRIGGERS, BackgroundSpend, background_trigger
from ._budgets import BOT_SCOPE, Budgets, utc_day
from ._children import ORPHANED, ChildRuns
from ._failure_reply import FailureReply
from ._heartbeat import Heartbeat
from ._history import HistoryIndex, forget_history
from ._metrics import CONTENT_TYPE, Metrics
from ._reminders import MIN_CRON_INTERVAL, Reminders, check_cron, parse_when, reminder_id
from ._roles import RoleGuard
from ._schedules import Scheduler, next_fire, tick_id
from ._stops import STOPPED_BY_OPERATOR, RunStops, request_stop

__all__ = [
    "Approvals",
    "OPERATOR",
    "Access",
    "BACKGROUND_SCOPE",
    "BACKGROUND_TRIGGERS",
    "BOT_SCOPE",
    "BackgroundSpend",
    "Budgets",
    "CONTENT_TYPE",
    "ChildRuns",
    "Decision",
    "FailureReply",
    "Heartbeat",
    "HistoryIndex",
    "MIN_CRON_INTERVAL",
    "Metrics",
    "ORPHANED",
    "POLICIES",
    "PairingError",
    "Reminders",
    "RoleGuard",
    "RunStops",
    "STOPPED_BY_OPERATOR",
    "Scheduler",
    "background_trigger",
    "check_cron",
    "forget_history",
    "next_fire",
    "parse_when",
    "reminder_id",
    "request_stop",
    "tick_id",
    "utc_day",
]

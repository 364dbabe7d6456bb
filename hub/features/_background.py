"""Background spend: what schedules, reminders, webhooks and child runs may spend per UTC day
(``[limits] background_cost_per_day``), apart from conversations.

A run is background when its input came from a trigger nobody is waiting on in a chat: a
schedule (input type ``schedule``), a webhook (``webhook``), another run (``child``, or a run
with a parent) or a reminder (``reminder``: the type a reminder's input is sent with, the
seam for ``[agent] reminders``). Such a run draws on the scope ``background`` of the usage
store, in money at ``[model]`` prices.

Across workers the limit holds through the store: before it starts, a background run
reserves a hold (the most a background run has cost here so far) with
`reserve()`, one conditional statement that adds it only if the
day's total stays within the limit, so workers never admit together more runs than the
limit leaves room for. Each step's cost is then added as it is spent, and the hold given
back when the run ends. A run the store refuses is skipped: ``killed`` with reason
``background_cost_per_day (LIMIT)`` before any model call, a log line and
``hub_background_skipped_total{trigger}``, and no reply to anyone (nobody is waiting in a
chat). A run already in progress finishes, its steps counted. The next UTC day starts from
zero.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..config import LimitsSection
from ..definitions import RunContext, RunResult, StopRun
from ..engine import Plugin
from ..logs import StepLog
from ..store import RunState, UsageStore
from ._budgets import utc_day

__all__ = ["BACKGROUND_SCOPE", "BACKGROUND_TRIGGERS", "BackgroundSpend", "background_trigger"]

log = logging.getLogger("hub.features")

BACKGROUND_SCOPE = "background"
"""The usage scope of background runs (``[limits] background_cost_per_day``)."""

BACKGROUND_TRIGGERS = ("schedule", "reminder", "webhook", "child")
"""Input types whose runs are background runs (a run with a parent is one too: ``child``)."""


def background_trigger(ctx: RunContext) -> str | None:
    """The trigger that makes this run a background run, or None for a conversation's."""
    if ctx.run.parent_id is not None:
        return "child"
    for e in ctx.inputs:
        if e.type in BACKGROUND_TRIGGERS:
            return e.type
    return None


@dataclass(slots=True)
class _Held:
    day: str
    hold: float
    spent: float = 0.0


class BackgroundSpend(Plugin):
    """The background spend (see the module doc): ``before_run`` reserves, ``after_step``
    counts, ``after_run`` gives the hold back. ``skipped(trigger)`` counts a skipped run
    (the metrics)."""

    name = "background_spend"

    def __init__(
        self,
        limits: LimitsSection,
        store: UsageStore,
        *,
        skipped: Callable[[str], None] = lambda trigger: None,
        today: Callable[[], str] = utc_day,
    ) -> None:
        self.limits = limits
        self.store = store
        self.skipped = skipped
        self.today = today
        """The UTC day (``YYYY-MM-DD``); swappable until start, so tests turn the day."""
        self._held: dict[str, _Held] = {}
        self._largest = 0.0  # the most one background run has cost in this process
        self._skips: dict[str, int] = {}  # background runs skipped here, by day

    @property
    def limit(self) -> float:
        return self.limits.background_cost_per_day

    def reason(self) -> str:
        return f"background_cost_per_day ({self.limit:g})"

    def skipped_today(self) -> int:
        """Background runs this worker skipped today."""
        return self._skips.get(self.today(), 0)

    async def spent(self, day: str | None = None) -> float:
        """What background runs spent on ``day`` (today), every worker's, holds included."""
        return await self.store.cost(BACKGROUND_SCOPE, day or self.today())

    async def before_run(self, ctx: RunContext) -> None:
        trigger = background_trigger(ctx)
        if not self.limit or trigger is None:
            return
        day = self.today()
        hold = min(self._largest, self.limit)
        if not await self.store.reserve(BACKGROUND_SCOPE, day, hold, self.limit):
            self._skips = {day: self._skips.get(day, 0) + 1}  # only today's count is kept
            self.skipped(trigger)
            log.warning(
                "background spend: the %s run %s of %s is skipped: %s spent today (UTC); runs again tomorrow",
                trigger,
                ctx.run.id[:8],
                ctx.context.id,
                self.reason(),
            )
            raise StopRun(RunState.KILLED, self.reason())
        self._held[ctx.run.id] = _Held(day, hold)

    def after_step(self, ctx: RunContext, step: StepLog) -> str | None:
        held = self._held.get(ctx.run.id)
        if held is None or not step.cost:
            return None
        held.spent += step.cost
        self.store.add_cost(BACKGROUND_SCOPE, held.day, step.cost)
        return None

    async def after_run(self, result: RunResult, ctx: RunContext | None) -> None:
        held = self._held.pop(result.run_id, None)
        if held is None:
            return
        if held.hold:
            self.store.add_cost(BACKGROUND_SCOPE, held.day, -held.hold)
        self._largest = max(self._largest, held.spent)

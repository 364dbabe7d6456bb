"""Daily budgets, in tokens and in money, and the reply a killed run leaves.

Per-run limits (steps, tokens, seconds) are the engine's (``[agent]``). This module adds
what spans runs (``[limits]``):

- ``conversation_tokens_per_day`` and ``user_tokens_per_day``: tokens are counted after
  every step, per UTC day, in a `UsageStore`;
- ``conversation_cost_per_day``, ``user_cost_per_day`` and ``cost_per_day`` (the whole bot):
  money, each step's cost at ``[model] price_input``/``price_output`` (0 = unknown: nothing
  is counted), in the same store.

A run over a budget is ``killed`` with the budget as its reason: before its first step when
the budget was already spent (no model call at all), or after the step that spent it.
``reply``: when a limit kills a run, the user gets this text through the conversation's
reply output instead of silence.

A user is counted per person (``hub.store.People``): ``user:cli:alice`` and
``user:telegram:42`` while not linked, the platform being the extension that owns the
conversation's context; identities joined by ``/link`` share their person's one budget.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from ..config import LimitsSection
from ..definitions import Output, RunContext, RunResult, StopRun
from ..engine import Plugin, send_reply
from ..logs import StepLog, VoiceLog
from ..store import RunState, RunStore, UsageStore

__all__ = ["BOT_SCOPE", "Budgets", "LIMIT_REASONS", "is_limit", "utc_day"]

log = logging.getLogger("hub.features")

LIMIT_REASONS = (
    "max_steps",
    "max_tokens",
    "timeout",
    "stalled",
    "conversation_tokens_per_day",
    "user_tokens_per_day",
    "conversation_cost_per_day",
    "user_cost_per_day",
    "cost_per_day",
    "background_cost_per_day",
)
"""Kill reasons (prefixes) that are limits: the user gets the limit reply. Shutdown, an
operator's stop and a crash are not limits: their input is handled again, not refused."""


BOT_SCOPE = "bot"
"""The usage scope of the whole bot (``cost_per_day``)."""


def utc_day(ts: float | None = None) -> str:
    """The UTC date of ``ts`` (default: now) as ``YYYY-MM-DD``."""
    global _last_day
    day = int((time.time() if ts is None else ts) // 86400)  # a POSIX day is 86,400 s exactly
    last = _last_day  # one tuple, read and replaced whole: safe from any thread
    if last[0] != day:  # formatted once a day, not at every step of every run
        last = _last_day = (day, time.strftime("%Y-%m-%d", time.gmtime(day * 86400)))
    return last[1]


_last_day: tuple[int, str] = (-(2**62), "")


class Budgets(Plugin):
    """Daily budgets and the limit reply: a plugin (``before_run``, ``after_step``, ``after_run``).

    Totals of today are cached for the scopes of runs in flight: the store is read when a
    run starts (so another worker's usage counts from the next run on) and written after
    every step. ``outputs`` is the hub's output registry (for a context that inherits its
    reply output from an extension) and ``runs`` records the limit reply.
    """

    name = "limits"

    def __init__(
        self, limits: LimitsSection, store: UsageStore, *, outputs: Mapping[str, Output], runs: RunStore
    ) -> None:
        self.limits = limits
        self.store = store
        self.outputs = outputs
        self.runs = runs
        self._today = utc_day()
        self._used: dict[str, int] = {}
        self._spent: dict[str, float] = {}

    # --- scopes and totals --------------------------------------------------------------

    def _scopes(self, ctx: RunContext) -> list[tuple[str, int, str]]:
        """(scope, budget, name of the limit) for each token budget that applies to this run."""
        limits = self.limits
        out = []
        if limits.conversation_tokens_per_day:
            budget = limits.conversation_tokens_per_day
            out.append((f"conversation:{ctx.context.id}", budget, "conversation_tokens_per_day"))
        if limits.user_tokens_per_day and ctx.user:
            out.append((_user_scope(ctx), limits.user_tokens_per_day, "user_tokens_per_day"))
        return out

    def _cost_scopes(self, ctx: RunContext) -> list[tuple[str, float, str]]:
        """(scope, budget, name of the limit) for each money budget that applies to this run."""
        limits = self.limits
        out = []
        if limits.conversation_cost_per_day:
            out.append(
                (f"conversation:{ctx.context.id}", limits.conversation_cost_per_day, "conversation_cost_per_day")
            )
        if limits.user_cost_per_day and ctx.user:
            out.append((_user_scope(ctx), limits.user_cost_per_day, "user_cost_per_day"))
        if limits.cost_per_day:
            out.append((BOT_SCOPE, limits.cost_per_day, "cost_per_day"))
        return out

    def _roll(self) -> str:
        day = utc_day()
        if day != self._today:
            self._today, self._used, self._spent = day, {}, {}
        return day

    def used(self, scope: str) -> int:
        """Tokens counted today for a scope (as far as this process knows)."""
        self._roll()
        return self._used.get(scope, 0)

    def spent(self, scope: str) -> float:
        """Money counted today for a scope (as far as this process knows)."""
        self._roll()
        return self._spent.get(scope, 0.0)

    def _over(self, ctx: RunContext) -> str | None:
        for scope, budget, name in self._scopes(ctx):
            if self._used.get(scope, 0) >= budget:
                return f"{name} ({budget})"
        for scope, money, name in self._cost_scopes(ctx):
            if self._spent.get(scope, 0.0) >= money:
                return f"{name} ({money:g})"
        return None

    # --- hooks --------------------------------------------------------------------------

    async def before_run(self, ctx: RunContext) -> None:
        day = self._roll()
        for scope, _, _ in self._scopes(ctx):
            self._used[scope] = max(self._used.get(scope, 0), await self.store.get(scope, day))
        for scope, _, _ in self._cost_scopes(ctx):
            self._spent[scope] = max(self._spent.get(scope, 0.0), await self.store.cost(scope, day))
        reason = self._over(ctx)
        if reason:
            raise StopRun(RunState.KILLED, reason)

    def after_step(self, ctx: RunContext, step: StepLog) -> str | None:
        """Count the step's tokens and cost; the budget it spent, if any, stops the run."""
        self.count(ctx, step.prompt_tokens + step.completion_tokens, step.cost)
        return self._over(ctx)

    def count(self, ctx: RunContext | None, tokens: int, cost: float) -> None:
        """Count a model call's tokens and cost against the budgets of ``ctx``'s run (a step,
        or work done for the run after it, as its episode's summary); with no ``ctx``, the
        bot-wide money budget only."""
        day = self._roll()
        if tokens and ctx is not None:
            for scope, _, _ in self._scopes(ctx):
                self._used[scope] = self._used.get(scope, 0) + tokens
                self.store.add(scope, day, tokens)
        if cost:
            if ctx is not None:
                scopes = [scope for scope, _, _ in self._cost_scopes(ctx)]
            else:
                scopes = [BOT_SCOPE] if self.limits.cost_per_day else []
            for scope in scopes:
                self._spent[scope] = self._spent.get(scope, 0.0) + cost
                self.store.add_cost(scope, day, cost)

    async def after_run(self, result: RunResult, ctx: RunContext | None) -> None:
        """Count what the run's voice cost ([voice]: heard and spoken, which no step counted),
        then tell the user when a limit ended their run (instead of leaving them in silence)."""
        voice = sum(e.cost for e in result.logs if isinstance(e, VoiceLog))
        if voice:
            self.count(ctx, 0, voice)
        text = self.limits.reply
        if ctx is None or not text or result.state != RunState.KILLED or not is_limit(result.reason):
            return
        if (result.reason or "").startswith("background_cost_per_day"):
            return  # a skipped background run: nobody is waiting for it in a chat
        entry = await send_reply(
            ctx, text, outputs=self.outputs, runs=self.runs, data={"limit_reply": result.reason}, step=result.steps
        )
        if entry is not None:
            result.logs.append(entry)


def _user_scope(ctx: RunContext) -> str:
    """The person's (``user:`` and their person's name: ``user:telegram:42`` for one not linked,
    and the same for every identity linked to it, so that linking does not multiply a budget)."""
    if ctx.person is not None:
        return f"user:{ctx.person}"
    platform = ctx.context.extension or ctx.context.type.split(":", 1)[0]
    return f"user:{platform}:{ctx.user}"


def is_limit(reason: str | None) -> bool:
    """Whether a kill reason is one of the limits (whose reply is ``[limits] reply``)."""
    if not reason:
        return False
    return any(reason == p or reason.startswith(p + " ") for p in LIMIT_REASONS)

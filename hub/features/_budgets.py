"""Daily token budgets per conversation and per user, and the reply a killed run leaves.

Per-run limits (steps, tokens, seconds) are the engine's (``[agent]``). This module adds
what spans runs (``[limits]``):

- ``conversation_tokens_per_day`` and ``user_tokens_per_day``: tokens are counted after
  every step, per UTC day, in a :class:`~hub.store.UsageStore`. A run over budget is ``killed`` with
  the budget as its reason: before its first step when the budget was already spent, or
  after the step that spent it.
- ``reply``: when a limit kills a run, the user gets this text through the conversation's
  reply output instead of silence.

A user is counted per platform: ``cli:alice`` and ``telegram:42``, the platform being the
extension that owns the conversation's context.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from ..config import LimitsSection
from ..definitions import Output, RunContext, RunResult, StopRun
from ..engine import LiveText, Plugin
from ..logs import OutputLog, StepLog
from ..store import RunState, RunStore, UsageStore

__all__ = ["Budgets", "LIMIT_REASONS", "utc_day"]

log = logging.getLogger("hub.features")

LIMIT_REASONS = (
    "max_steps",
    "max_tokens",
    "timeout",
    "stalled",
    "conversation_tokens_per_day",
    "user_tokens_per_day",
)
"""Kill reasons (prefixes) that are limits: the user gets the limit reply. Shutdown, an
operator's stop and a crash are not limits: their input is handled again, not refused."""


def utc_day(ts: float | None = None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


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

    # --- scopes and totals --------------------------------------------------------------

    def _scopes(self, ctx: RunContext) -> list[tuple[str, int, str]]:
        """(scope, budget, name of the limit) for each budget that applies to this run."""
        limits = self.limits
        out = []
        if limits.conversation_tokens_per_day:
            budget = limits.conversation_tokens_per_day
            out.append((f"conversation:{ctx.context.id}", budget, "conversation_tokens_per_day"))
        if limits.user_tokens_per_day and ctx.user:
            platform = ctx.context.extension or ctx.context.type.split(":", 1)[0]
            out.append((f"user:{platform}:{ctx.user}", limits.user_tokens_per_day, "user_tokens_per_day"))
        return out

    def _roll(self) -> str:
        day = utc_day()
        if day != self._today:
            self._today, self._used = day, {}
        return day

    def used(self, scope: str) -> int:
        """Tokens counted today for a scope (as far as this process knows)."""
        self._roll()
        return self._used.get(scope, 0)

    def _over(self, ctx: RunContext) -> str | None:
        for scope, budget, name in self._scopes(ctx):
            if self._used.get(scope, 0) >= budget:
                return f"{name} ({budget})"
        return None

    # --- hooks --------------------------------------------------------------------------

    async def before_run(self, ctx: RunContext) -> None:
        day = self._roll()
        for scope, _, _ in self._scopes(ctx):
            self._used[scope] = max(self._used.get(scope, 0), await self.store.get(scope, day))
        reason = self._over(ctx)
        if reason:
            raise StopRun(RunState.KILLED, reason)

    def after_step(self, ctx: RunContext, step: StepLog) -> str | None:
        """Count the step's tokens; the budget it spent, if any, stops the run."""
        tokens = step.prompt_tokens + step.completion_tokens
        day = self._roll()
        if tokens:
            for scope, _, _ in self._scopes(ctx):
                self._used[scope] = self._used.get(scope, 0) + tokens
                self.store.add(scope, day, tokens)
        return self._over(ctx)

    async def after_run(self, result: RunResult, ctx: RunContext | None) -> None:
        """Tell the user when a limit ended their run (instead of leaving them in silence)."""
        text = self.limits.reply
        if ctx is None or not text or result.state != RunState.KILLED or not _is_limit(result.reason):
            return
        definition = ctx.context.definition
        otype = definition.reply_output
        out = next((o for o in definition.outputs if o.type == otype), None) or self.outputs.get(otype or "")
        if out is None or not out.is_text:
            log.warning(
                "run %s killed (%s): context %s has no text reply output for the limit reply",
                result.run_id[:8],
                result.reason,
                ctx.context.type,
            )
            return
        entry = OutputLog(type=out.type, content=text, step=result.steps, data={"limit_reply": result.reason})
        try:
            attributes = out.attributes.model_validate({})
            content: Any = LiveText.whole(text) if out.live else text  # a live output's handler reads a LiveText
            data: Any = await out.handler(content, ctx.derive(attributes=attributes))
        except ValidationError as e:
            entry.error = f"the reply output needs attributes: {e.errors()[0]['loc']}"
        except Exception as e:
            entry.error = f"{type(e).__name__}: {e}"
            log.error("run %s: the limit reply failed: %s", result.run_id[:8], entry.error)
        else:
            entry.sent = True
            if data is not None:
                entry.data = {"limit_reply": result.reason, "result": data}
        result.logs.append(entry)
        try:
            self.runs.append(ctx.run, entry)
        except Exception:
            log.exception("run %s: recording the limit reply failed", result.run_id[:8])


def _is_limit(reason: str | None) -> bool:
    if not reason:
        return False
    return any(reason == p or reason.startswith(p + " ") for p in LIMIT_REASONS)

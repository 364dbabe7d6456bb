"""The one ordered hook protocol through which features take part in a run.

A feature (limits, the role guard, episodic memory, child runs, metrics, ...) is a
`Plugin`: it receives what it needs when it is built, and overrides only the hooks it
takes part in. The engine calls the hooks through one `Plugins` dispatcher, in the
order the composition root registered them:

1. ``before_run(run)``: after the context is prepared, before the first step. Raising
   ``StopRun`` ends the run in that state; any other exception fails it.
2. ``authorize(action, run)``: before an action runs; the first denial wins, and the model
   sees it.
3. ``after_step(run, step)``: after each step. Every plugin sees the step (a count must
   not be skipped because an earlier plugin stops the run); the first stop reason returned
   ends the run ``killed`` with that reason (a limit).
4. ``on_output(run, output)``: after an output was handed to its platform.
5. ``after_run(result, run)``: once the run is terminal and recorded. Each plugin's hook is
   isolated: one that raises is logged and never stops the others.

No feature replaces another's attribute: everything goes through here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..definitions import Action, RunContext, RunResult
    from ..logs import OutputLog, StepLog

__all__ = ["Plugin", "Plugins"]

log = logging.getLogger("hub.engine")


class Plugin:
    """A feature's part in each run. Every hook is optional: the defaults do nothing."""

    name: str = "plugin"

    async def before_run(self, run: RunContext) -> None:
        return None

    async def authorize(self, action: Action, run: RunContext) -> str | None:
        """None to allow the call, or the reason of a denial (which the model sees)."""
        return None

    def after_step(self, run: RunContext, step: StepLog) -> str | None:
        """None to go on, or the reason the run must stop (it ends ``killed``)."""
        return None

    def on_output(self, run: RunContext, output: OutputLog) -> None:
        return None

    async def after_run(self, result: RunResult, run: RunContext | None) -> None:
        return None


class Plugins:
    """The registered plugins, called in order. Built once by the composition root."""

    def __init__(self, plugins: Sequence[Plugin] = ()) -> None:
        self._plugins: list[Plugin] = list(plugins)

    def __iter__(self) -> Iterator[Plugin]:
        return iter(self._plugins)

    def __len__(self) -> int:
        return len(self._plugins)

    def add(self, plugin: Plugin) -> None:
        """Register one more plugin (composition time only: before the hub starts)."""
        self._plugins.append(plugin)

    async def before_run(self, run: RunContext) -> None:
        for p in self._plugins:
            await p.before_run(run)

    async def authorize(self, action: Action, run: RunContext) -> str | None:
        for p in self._plugins:
            denial = await p.authorize(action, run)
            if denial:
                return denial
        return None

    def after_step(self, run: RunContext, step: StepLog) -> str | None:
        stop: str | None = None
        for p in self._plugins:
            reason = p.after_step(run, step)
            if reason and stop is None:
                stop = reason
        return stop

    def on_output(self, run: RunContext, output: OutputLog) -> None:
        for p in self._plugins:
            try:
                p.on_output(run, output)
            except Exception:
                log.exception("plugin %s: on_output failed", p.name)

    async def after_run(self, result: RunResult, run: RunContext | None) -> None:
        for p in self._plugins:
            try:
                await p.after_run(result, run)
            except Exception:
                log.exception("plugin %s: after_run failed for run %s", p.name, result.run_id)

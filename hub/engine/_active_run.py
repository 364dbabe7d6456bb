"""One run as the engine's step loop holds it (`Run`).

The run's one object: its record and event log, the slot whose inputs it takes, the
conversation once prepared, what handlers see ([`RunContext`][hub.RunContext]) and the
step loop's state. The types handlers see live in `hub.definitions`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..config import RouteSection
from ..definitions import (
    ContextInstance,
    RunContext,
    StopRun,
)
from ..errors import StoreError
from ..logs import Log
from ..media import RunMedia
from ..store import RunRecord, RunState
from ._agent_context import AgentView
from ._voice import RunVoice

if TYPE_CHECKING:
    from ..definitions import Action, Output
    from ._deps import EngineDeps
    from ._live_output import LiveOutput
    from ._runner import Slot

__all__ = ["Run", "ERROR_RETRIES"]

log = logging.getLogger("hub.engine")

ERROR_RETRIES = 2
"""How often ``on_error``'s "retry" is followed for one failing action call or hook (the
model's own errors follow the model's retry policy): never an unbounded loop."""


def _no_progress() -> None:
    pass


def _stop_in(slot: Slot, run_id: str, state: RunState, reason: str) -> None:
    """What `RunContext.stop` calls: `Run.stop` without a reference to the run."""
    slot.stop_with(StopRun(state, reason), run_id)


class Run:
    """One run of one context instance: its record and event log, the slot whose inputs it
    takes, the conversation (once prepared), what handlers see, and the step loop's state."""

    __slots__ = (
        "deps",
        "record",
        "slot",
        "logs",
        "instance",
        "ctx",
        "actions",
        "outputs",
        "progress",
        "step",
        "feedback",
        "tasks",
        "output_chain",
        "input_ids",
        "created",
        "creating",
        "limit",
        "durable_inputs",
        "media",
        "voice",
        "live",
        "output_open",
        "route",
        "aborted",
        "compacted",
    )

    def __init__(self, deps: EngineDeps, record: RunRecord, slot: Slot) -> None:
        self.deps = deps
        self.record = record
        self.slot = slot
        self.logs: list[Log] = []
        self.instance: ContextInstance | None = None
        self.ctx: RunContext | None = None
        self.route: RouteSection | None = None
        """The ``[[routes]]`` its conversation matched (its persona, model and actions), if any."""
        self.actions: dict[str, Action] = {}
        self.outputs: dict[str, Output] = {}
        self.progress: Callable[[], None] = _no_progress
        self.step = 0
        self.feedback = False
        self.compacted = False  # a compaction ran in this run (one per run, unless the model refuses)
        """Something this step went wrong that the model must see (a refused output)."""
        self.tasks: set[asyncio.Task[Any]] = set()
        self.output_chain: asyncio.Task[None] | None = None
        self.input_ids: list[str] = []
        self.created = False
        """Whether the run's row was written (a store error may have refused it)."""
        self.creating: Awaitable[None] | None = None
        """The row queued at the start, until the first step (or the end) waits for it."""
        self.durable_inputs = 0
        """How many of ``input_ids`` are known taken on disk (see ``Engine._step``)."""
        self.limit: str | None = None
        """A plugin's reason to stop the run, given after the last step (a spent budget)."""
        self.media = RunMedia(deps.media_limits)
        self.voice = RunVoice(deps, self) if deps.voice is not None else None
        """``[voice]`` for this run: its voice notes heard, its replies spoken when a platform asks."""
        if self.voice is not None:
            self.media.speaker = self.voice.speak
        """The run's files: its inputs' as the prompt shows them, its actions' by handle."""
        self.live: LiveOutput | None = None
        """The open ``<output>`` of this step's stream, when it is delivered live."""
        self.aborted: str | None = None
        """Why ``on_error`` aborted the run as it was ending (an ``on_run`` hook that raised)."""
        self.output_open = False
        """Whether this step's stream is inside an ``<output>`` whose content began (delivered
        live or not): the output dispatch decided on it at its first content."""

    @property
    def id(self) -> str:
        return self.record.id

    def context_for(
        self,
        instance: ContextInstance,
        progress: Callable[[], None],
        pause: Callable[[bool], None] | None = None,
    ) -> RunContext:
        """What handlers see of this run: the one place a run's [`RunContext`][hub.RunContext] is built
        (each call and output derives its own from it)."""
        ctx: RunContext = RunContext(self.deps.hub, self.record, instance, self.logs, runs=self.deps.runs)
        ctx.progress = progress
        if pause is not None:
            ctx.pause = pause
        ctx.media = self.media
        # the slot and the id, not the bound method: a RunContext that held its Run made every
        # run's objects (about 50) cyclic garbage, left to the collector's full pauses (bench/soak.py)
        ctx._stop = functools.partial(_stop_in, self.slot, self.id)
        bot = self.deps.agent()
        ctx.agent = AgentView(bot, ctx) if bot is not None else None
        return ctx

    def attach(self, instance: ContextInstance, ctx: RunContext) -> None:
        """The conversation is prepared: the run has steps to take. Until then the run's end
        runs no ``on_run`` hook and saves no memory (none was loaded)."""
        self.instance = instance
        self.ctx = ctx
        self.progress = ctx.progress

    def stop(self, state: RunState, reason: str, *, store_failure: StoreError | None = None) -> None:
        """End the run with ``state`` from inside one of its tasks or from outside
        (``store_failure``: the store error that failed it)."""
        self.slot.stop_with(StopRun(state, reason, store_failure=store_failure), self.id)

    async def on_error(self, error: BaseException, *, default: str) -> str:
        """The context's ``on_error`` decision on ``error`` (a model, action, hook or store
        error): "continue", "retry" or "abort"; ``default`` when the context has no hook or
        the run is not prepared yet. An answer that is none of them aborts (logged)."""
        if self.instance is None or self.ctx is None:
            return default
        hook = self.instance.definition.on_error
        if hook is None:
            return default
        decision = hook(error, self.ctx)
        if asyncio.iscoroutine(decision):
            decision = await decision
        if decision not in ("continue", "retry", "abort"):
            log.error("on_error hook of %s returned %r; aborting", self.instance.type, decision)
            return "abort"
        return str(decision)

    def append(self, entry: Log) -> None:
        """Add an entry to the run's log and its store's event log."""
        self.logs.append(entry)
        self.deps.runs.append(self.record, entry)

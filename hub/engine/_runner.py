"""The runner: the queues and the limits every run shares.

Inputs for a context instance wait in its `Slot`, in the order received; the slot's
run takes them at its next step boundary (`Slot.take()`). At most one run of a slot goes
at a time: `Intake` drives each slot and records its task here. Model
calls share one semaphore (`Runner.llm_slot()`); action calls that name the same
``queue`` run one at a time (`Runner.queue_lock()`).
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ..definitions import Context, RunResult, StopRun
from ..errors import RunError
from ..logs import InputLog, StateLog
from ..store import RunState

__all__ = ["BUSY_MODES", "INTERRUPTED", "Runner", "Slot", "Submission"]

BUSY_MODES = ("steer", "queue", "collect", "interrupt")
"""``[agent] busy``: what a message arriving during a run does (see `Slot.take()`)."""

INTERRUPTED = "interrupted"
"""The reason a run ends ``killed`` with when a new message interrupts it (``busy = "interrupt"``)."""

log = logging.getLogger("hub.engine")


class Submission:
    """An input handed to the runner: which run took it, and that run's result.

    What [`Hub.submit`][hub.Hub.submit] returns at once; ``await submission.wait()`` is what
    [`Hub.send`][hub.Hub.send] does.

    Attributes:
        input: The input as recorded; None when nothing was recorded (a duplicate).
        context: The conversation it went to (``TYPE:KEY``).
        duplicate: True when its ``platform_id`` was recorded before: a redelivery, not run again.
        run_id: Resolves to the id of the run that takes it.
        result: Resolves to that run's [`RunResult`][hub.RunResult].
    """

    __slots__ = ("input", "context", "run_id", "result", "duplicate")

    def __init__(self, entry: InputLog | None, context: str, *, duplicate: bool = False) -> None:
        loop = asyncio.get_running_loop()
        self.input = entry
        self.context = context
        self.duplicate = duplicate
        self.run_id: asyncio.Future[str] = loop.create_future()
        self.result: asyncio.Future[RunResult] = loop.create_future()

    async def wait(self) -> RunResult:
        """The result of the run that handles it, once it ended (cancelling the wait leaves the run alone)."""
        return await asyncio.shield(self.result)

    def taken_by(self) -> str | None:
        """The id of the run that took this input; None while none has, or when none will
        (its future was cancelled: answered without a run row, elsewhere, or never)."""
        if self.run_id.done() and not self.run_id.cancelled():
            return self.run_id.result()
        return None

    def ended(self) -> RunResult | None:
        """The run's end once it has one; None while it goes on or when it was cancelled."""
        if self.result.done() and not self.result.cancelled():
            return self.result.result()
        return None


class Slot:
    """The inputs waiting for one context instance, and its run in progress."""

    def __init__(self, definition: Context, args: Any, key: str, *, take_chars: int | None = None) -> None:
        self.take_chars = take_chars
        self.definition = definition
        self.args = args
        self.key = key
        self.id = f"{definition.type}:{key}"
        self.pending: list[InputLog] = []
        self.waiting: dict[str, Submission] = {}
        self.parents: dict[str, str] = {}
        self.task: asyncio.Task[None] | None = None
        self.cancel_reason: str | None = None
        self.stop_exc: StopRun | None = None
        # the run in progress until it has decided how it ends: the one run a stop may end
        # (a stop for a run already finishing, or for one that ended, ends nothing)
        self.current: str | None = None
        self.ended: RunResult | None = None  # the end of a run finished as its task was cancelled
        # with workers: when the oldest input of this conversation held by another worker
        # was received; the run in progress takes only inputs older than it
        self.before: float | None = None
        self.once = False  # the run in progress takes inputs once (set with workers)
        self.closed = False
        self.busy = "steer"  # [agent] busy for this conversation, as the intake last read it
        self.took: str | None = None  # the last run that took inputs from here

    def peek(self) -> InputLog | None:
        return self.pending[0] if self.pending else None

    def parent_of(self, entry: InputLog | None) -> str | None:
        return self.parents.get(entry.id) if entry else None

    def take(self, run_id: str) -> list[InputLog]:
        """Hand the waiting inputs to the run ``run_id``: all of them, or with ``take_chars``
        as many as fit in it (each counted at most a quarter of it, since the prompt cuts a
        long one to its share; always at least one). The rest wait for the next step.

        ``busy`` decides what a run takes after its first step: ``"steer"`` whatever arrived
        (it joins the next step); the other modes nothing, so what arrives waits for a run
        after this one: ``"queue"`` one input per run, in turn; ``"collect"`` and
        ``"interrupt"`` all that waits (the intake stops the run an input interrupts)."""
        if self.closed:
            return []
        if self.busy != "steer" and self.took == run_id:
            return []  # mid-run: the new input waits for a run after this one
        n = len(self.pending) if self.take_chars is None else _fitting(self.pending, self.take_chars)
        if self.busy == "queue":
            n = min(n, 1)
        if self.before is not None:  # older inputs wait on another worker: not past them
            n = min(n, sum(1 for e in self.pending if e.ts <= self.before))
        # with workers a run takes its inputs once, when it starts: one that arrives here
        # mid-run may have an older one on another worker, so it waits for the next run,
        # which looks first
        self.closed = self.once
        taken, self.pending = self.pending[:n], self.pending[n:]
        if taken:
            self.took = run_id
        for e in taken:
            sub = self.waiting.get(e.id)
            if sub is not None and not sub.run_id.done():
                sub.run_id.set_result(run_id)
        return taken

    def interruptible(self) -> bool:
        """Whether a new input stops the run in progress (``busy = "interrupt"``): only once
        that run has taken its inputs, so an input never ends a run before it has any."""
        return self.busy == "interrupt" and self.current is not None and self.took == self.current

    def stop_with(self, stop: StopRun, run_id: str) -> None:
        """End the run ``run_id`` with a terminal state decided inside one of its tasks, or
        from outside (a user's /stop, an operator's stop). A no-op unless that run is the one
        in progress and has not yet decided how it ends: a stop never cancels a run's finish
        (its memory, its row, its inputs), nor the slot's next run."""
        if self.stop_exc is None and self.current is not None and self.current == run_id:
            self.stop_exc = stop
            if self.task is not None:
                self.task.cancel()


class Runner:
    """The queues and the limits: one `Slot` per context instance, at most one run of
    each at a time (whoever drives the slot, `Intake`, sets its
    ``task``), the model-call limit every step shares, and the locks of actions that name the
    same ``queue``. It never starts a run itself."""

    def __init__(self, *, concurrency: int, take_chars: int | None = None) -> None:
        self.take_chars = take_chars
        self.slots: dict[str, Slot] = {}
        self._llm = asyncio.Semaphore(concurrency)
        self._queues: dict[str, asyncio.Lock] = {}
        self.accepting = True
        self.llm_waiting = 0

    @asynccontextmanager
    async def llm_slot(self) -> AsyncIterator[None]:
        self.llm_waiting += 1
        try:
            await self._llm.acquire()
        finally:
            self.llm_waiting -= 1
        try:
            yield
        finally:
            self._llm.release()

    def queue_lock(self, name: str) -> asyncio.Lock:
        lock = self._queues.get(name)
        if lock is None:
            lock = self._queues[name] = asyncio.Lock()
        return lock

    @property
    def running(self) -> int:
        return sum(1 for s in self.slots.values() if s.task is not None and not s.task.done())

    @property
    def queued(self) -> int:
        return sum(len(s.pending) for s in self.slots.values())

    def queue(
        self, definition: Context, args: Any, key: str, entry: InputLog, *, parent_id: str | None = None
    ) -> tuple[Slot, Submission]:
        """Queue a recorded input in its context instance's slot, in the order received."""
        if not self.accepting:
            raise RunError("the hub is shutting down and takes no new input")
        slot_id = f"{definition.type}:{key}"
        slot = self.slots.get(slot_id)
        if slot is None:
            slot = self.slots[slot_id] = Slot(definition, args, key, take_chars=self.take_chars)
        sub = Submission(entry, slot_id)
        # in the order received: an input resumed from the inbox (a dead worker's, taken
        # over) goes before the newer ones already queued, so replies keep the messages' order
        if slot.pending and slot.pending[-1].ts > entry.ts:
            bisect.insort(slot.pending, entry, key=lambda e: e.ts)
        else:
            slot.pending.append(entry)
        slot.waiting[entry.id] = sub
        if parent_id:
            slot.parents[entry.id] = parent_id
        return slot, sub

    def idle(self, slot: Slot) -> bool:
        """Whether ``slot`` has no run going (its driver must be started)."""
        return slot.task is None or slot.task.done()

    def release(self, slot: Slot) -> None:
        """Forget a slot whose driver ended with nothing queued."""
        if not slot.pending and self.slots.get(slot.id) is slot:
            del self.slots[slot.id]

    def abandon(self, slot: Slot) -> None:
        """The slot's driver was cancelled: every waiter is told (cancelled), none is left pending."""
        for sub in slot.waiting.values():
            if not sub.result.done():
                sub.result.cancel()
        slot.waiting.clear()

    def settle(self, slot: Slot, result: RunResult | None, error: BaseException | None) -> list[str]:
        """Resolve the submissions of the inputs the run took; after an engine bug, of every
        input waiting (so that no waiter is left pending and no bug loops). Returns the ids
        of the inputs answered with a failure made here."""
        failed: list[str] = []
        if result is not None:
            for e in result.logs:
                if isinstance(e, InputLog):
                    self._settle(slot, e.id, result)
        for entry_id, sub in list(slot.waiting.items()):
            taken_by = sub.taken_by()
            if taken_by is None and error is None:
                continue  # still pending: the slot's next run takes it
            if result is None or taken_by is None:
                reason = f"internal error: {type(error).__name__}: {error}" if error is not None else "internal error"
                run_id = taken_by or ""
                logs: list[Any] = [sub.input] if sub.input is not None else []
                fallback = RunResult(
                    run_id, slot.id, RunState.FAILED, reason, [*logs, StateLog(str(RunState.FAILED), reason)]
                )
                self._settle(slot, entry_id, fallback)
                failed.append(entry_id)
            else:
                self._settle(slot, entry_id, result)
        if error is not None:
            slot.pending.clear()
        return failed

    @staticmethod
    def _settle(slot: Slot, entry_id: str, result: RunResult) -> None:
        sub = slot.waiting.pop(entry_id, None)
        slot.parents.pop(entry_id, None)
        if sub is not None and not sub.result.done():
            sub.result.set_result(result)

    async def stop(self, grace: float) -> None:
        """Take no new input; give runs in flight ``grace`` seconds; then mark every slot so
        that a run cancelled from now on (by the hub's task group) is recorded as a shutdown."""
        self.accepting = False
        runs = [s.task for s in self.slots.values() if s.task is not None and not s.task.done()]
        if runs and grace > 0:
            log.info("waiting up to %.0fs for %d run(s) in flight", grace, len(runs))
            await asyncio.wait(runs, timeout=grace)
        for slot in list(self.slots.values()):
            slot.cancel_reason = "shutdown"


def _fitting(pending: list[InputLog], limit: int) -> int:
    """How many of the first inputs fit in ``limit`` characters (at least one)."""
    used = 0
    for i, e in enumerate(pending):
        c = e.content
        size = min(len(c) if isinstance(c, str) else len(json.dumps(c, default=str)), limit // 4)
        if i and used + size > limit:
            return i
        used += size
    return len(pending)

"""The task runner: one run at a time per context instance, bounded LLM concurrency.

Inputs for a context instance wait in its :class:`Slot`; the slot's run takes them at its
next step boundary, or a new run starts when none is going. LLM calls share one semaphore;
action calls that name the same ``queue`` run one at a time. Every task is tracked and
awaited (or cancelled, recorded as ``killed``) on stop.

Per-context serialisation is in process; with several workers sharing a PostgreSQL store
(``[store] url``) each run also holds its conversation's advisory lock (``lock``, given by the
composition root: :meth:`hub.store.sql.PgDatabase.lock`), so a conversation runs on one worker at
a time, and a dead worker's lock is let go by the server with its connection.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..backoff import Backoff
from ..definitions import Context, RunResult
from ..errors import RunError, StoreError
from ..logs import InputLog, OutputLog, StateLog
from ..store import RunState

if TYPE_CHECKING:
    from ..backoff import Backoff
    from ..store import InboxStore
from ..definitions import StopRun

__all__ = ["Runner", "Slot", "Submission"]

log = logging.getLogger("hub.engine")

STORE_RETRY_ATTEMPTS = 10
"""How often the inputs of a run the store failed are handed to a new run (after the
hub's one backoff, 1 s doubling up to 60 s); past that, they stay in the inbox for the
next start."""


class Submission:
    """An input handed to the runner: which run took it, and that run's result."""

    __slots__ = ("input", "context", "run_id", "result", "duplicate")

    def __init__(self, entry: InputLog | None, context: str, *, duplicate: bool = False) -> None:
        loop = asyncio.get_running_loop()
        self.input = entry
        self.context = context
        self.duplicate = duplicate
        self.run_id: asyncio.Future[str] = loop.create_future()
        self.result: asyncio.Future[RunResult] = loop.create_future()

    async def wait(self) -> RunResult:
        return await asyncio.shield(self.result)


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
        # with workers: when the oldest input of this conversation held by another worker
        # was received; the run in progress takes only inputs older than it
        self.before: float | None = None
        self.once = False  # the run in progress takes inputs once (set with workers)
        self.closed = False

    def peek(self) -> InputLog | None:
        return self.pending[0] if self.pending else None

    def parent_of(self, entry: InputLog | None) -> str | None:
        return self.parents.get(entry.id) if entry else None

    def take(self, run_id: str) -> list[InputLog]:
        """Hand the waiting inputs to the run ``run_id``: all of them, or with ``take_chars``
        as many as fit in it (each counted at most a quarter of it, since the prompt cuts a
        long one to its share; always at least one). The rest wait for the next step."""
        if self.closed:
            return []
        n = len(self.pending) if self.take_chars is None else _fitting(self.pending, self.take_chars)
        if self.before is not None:  # older inputs wait on another worker: not past them
            n = min(n, sum(1 for e in self.pending if e.ts <= self.before))
        # with workers a run takes its inputs once, when it starts: one that arrives here
        # mid-run may have an older one on another worker, so it waits for the next run,
        # which looks first
        self.closed = self.once
        taken, self.pending = self.pending[:n], self.pending[n:]
        for e in taken:
            sub = self.waiting.get(e.id)
            if sub is not None and not sub.run_id.done():
                sub.run_id.set_result(run_id)
        return taken

    def stop_with(self, stop: StopRun) -> None:
        """End the run in progress with a terminal state decided inside one of its tasks."""
        if self.stop_exc is None:
            self.stop_exc = stop
            if self.task is not None:
                self.task.cancel()


class Runner:
    """Runs at most one run per context instance at a time; ``run`` is the engine's (given
    by the composition root), ``inbox`` where answered inputs are marked done, ``lock`` (if
    any) what each run holds across processes, by the conversation's id."""

    def __init__(
        self,
        *,
        run: Callable[[Slot], Awaitable[RunResult]],
        inbox: InboxStore,
        concurrency: int,
        take_chars: int | None = None,
        lock: Callable[[str], AbstractAsyncContextManager[Any]] | None = None,
        claim: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._run = run
        self._lock = lock
        self._claim = claim
        self._inbox = inbox
        self.take_chars = take_chars
        self.slots: dict[str, Slot] = {}
        self._llm = asyncio.Semaphore(concurrency)
        self._queues: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.accepting = True
        self.llm_waiting = 0
        self.store_retry = Backoff(first=1.0, most=60.0)
        self.store_retry_attempts = STORE_RETRY_ATTEMPTS
        self._store_retries: dict[str, int] = {}

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

    def submit(
        self, definition: Context, args: Any, key: str, entry: InputLog, *, parent_id: str | None = None
    ) -> Submission:
        """Queue a recorded input for its context instance; start a run if none is going."""
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
        if slot.task is None or slot.task.done():
            slot.task = self.spawn(self._drive(slot), name=f"run:{slot_id}")
        return sub

    def spawn(self, coro: Any, *, name: str) -> asyncio.Task[Any]:
        """A tracked background task: awaited or cancelled on stop, its errors logged."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("task %s failed", task.get_name(), exc_info=task.exception())

    async def _drive(self, slot: Slot) -> None:
        try:
            while slot.pending:
                slot.stop_exc = None
                try:
                    result: RunResult | None = await self._locked_run(slot)
                    error: BaseException | None = None
                except asyncio.CancelledError:
                    for sub in slot.waiting.values():
                        if not sub.result.done():
                            sub.result.cancel()
                    slot.waiting.clear()
                    raise
                except Exception as e:  # a bug in the engine: every waiter still gets an answer
                    log.exception("the run of %s failed outside its own handling", slot.id)
                    result, error = None, e
                failed = self._resolve(slot, result, error)
                if result is not None:
                    self._after_store_outage(slot, result)
                if failed:
                    try:  # answered (failed): not handled again after a restart
                        await self._inbox.done(failed)
                    except Exception:
                        log.exception("inbox: marking %d input(s) of %s done failed", len(failed), slot.id)
        finally:
            if not slot.pending and self.slots.get(slot.id) is slot:
                del self.slots[slot.id]

    async def _locked_run(self, slot: Slot) -> RunResult | None:
        """The run, holding the conversation's lock across workers when there is one. The
        lock waits while another worker runs this conversation; a store that cannot give it
        is retried with the hub's backoff (the inputs stay queued here and in the inbox).
        Under the lock the run starts only once no older input of the conversation is held
        by another worker (one queued there, or a dead worker's until its lease lapses and
        it is taken over): it lets the lock go and waits for those to be answered first."""
        if self._lock is None:
            return await self._run(slot)
        attempt, wait = 0, 0.05
        while True:
            async with AsyncExitStack() as stack:
                while True:
                    try:
                        await stack.enter_async_context(self._lock(slot.id))
                        break
                    except StoreError as e:
                        delay = self.store_retry.delay(attempt)
                        attempt += 1
                        log.warning(
                            "%s: cannot take the conversation's lock (%s); retrying in %.1fs", slot.id, e, delay
                        )
                        await asyncio.sleep(delay)
                await self._keep_held(slot)
                if not slot.pending:
                    return None  # every one was another worker's: no run
                before = await self._oldest_elsewhere(slot)
                # equal times (two workers received at the same instant) both go: waiting on
                # each other would be a deadlock, and their order is not defined anyway
                if before is None or slot.pending[0].ts <= before:
                    # the run takes only what is older than that; with nothing older elsewhere,
                    # only what is queued now: an input that arrives after this check may have
                    # an older one recorded on another worker in between (the next run looks)
                    slot.before = before if before is not None else slot.pending[-1].ts
                    slot.once, slot.closed = True, False
                    try:
                        return await self._run(slot)
                    finally:
                        slot.before, slot.once, slot.closed = None, False, False
            if self._claim is not None and self.accepting:
                try:  # older inputs that nobody holds are claimed here (and queued) now
                    await self._claim()
                except Exception as e:  # the sweep claims them later
                    log.warning("%s: claiming older inputs failed: %s", slot.id, e)
                if slot.pending and await self._oldest_elsewhere(slot) is None:
                    continue  # they are ours now: run them, oldest first
            await asyncio.sleep(wait)  # the lock is let go: the older inputs' worker takes it
            wait = min(wait * 2, 1.0)

    async def _oldest_elsewhere(self, slot: Slot) -> float | None:
        try:
            return await self._inbox.oldest_elsewhere(slot.id, [e.id for e in slot.pending])
        except StoreError as e:
            log.warning("%s: cannot check for older inputs on other workers (%s); answering", slot.id, e)
            return None

    async def _keep_held(self, slot: Slot) -> None:
        """Under the conversation's lock, before the run: drop the queued inputs this worker
        no longer holds. Its lease on one can lapse while it waits (stalled past ``[store]
        lease``), and then another worker claims it and answers it, or has answered it in
        the run that held the lock just now; answering it here too would answer it twice.
        A store that cannot say keeps them all: the lease is renewed every third of it, so
        the ones still queued here are this worker's in all but a stall."""
        ids = [e.id for e in slot.pending]
        if not ids:
            return
        try:
            kept = set(await self._inbox.hold(ids))
        except StoreError as e:
            log.warning("%s: cannot confirm this worker still holds its inputs (%s); answering them", slot.id, e)
            return
        if len(kept) == len(ids):
            return
        slot.pending = [e for e in slot.pending if e.id in kept]
        for entry_id in ids:
            if entry_id not in kept:
                log.warning("%s: input %s was taken over by another worker: not answered here", slot.id, entry_id[:8])
                slot.parents.pop(entry_id, None)
                sub = slot.waiting.pop(entry_id, None)
                if sub is not None:
                    sub.duplicate = True  # answered elsewhere, as a redelivery is
                    sub.run_id.cancel()
                    sub.result.cancel()

    def _after_store_outage(self, slot: Slot, result: RunResult) -> None:
        """A run the store failed, having answered nothing, left its inputs in the inbox:
        hand them to a new run after a backoff, so they are answered once the store is back."""
        entries = [e for e in result.logs if isinstance(e, InputLog)]
        answered = any(isinstance(e, OutputLog) and e.answered for e in result.logs)
        if result.state != RunState.FAILED or result.store_failure is None or answered:
            for e in entries:
                self._store_retries.pop(e.id, None)
            return
        if not entries:
            return
        attempt = max(self._store_retries.get(e.id, 0) for e in entries)
        if attempt >= self.store_retry_attempts:
            for e in entries:
                self._store_retries.pop(e.id, None)
            log.error(
                "%d input(s) of %s failed by the store %d times; left in the inbox for the next start",
                len(entries),
                slot.id,
                attempt,
            )
            return
        for e in entries:
            self._store_retries[e.id] = attempt + 1
        delay = self.store_retry.delay(attempt)
        log.warning("%d input(s) of %s: the store failed the run; retrying in %.1fs", len(entries), slot.id, delay)

        async def retry() -> None:
            await asyncio.sleep(delay)
            if not self.accepting:
                return  # stopping: they are still in the inbox, the next start resumes them
            for e in entries:
                e.processed = False
                self.submit(slot.definition, slot.args, slot.key, e)

        self.spawn(retry(), name=f"store-retry:{slot.id}")

    def _resolve(self, slot: Slot, result: RunResult | None, error: BaseException | None) -> list[str]:
        """Resolve the submissions of the inputs the run took; after an engine bug, of every
        input waiting (so that no waiter is left pending and no bug loops). Returns the ids
        of the inputs answered with a failure made here."""
        failed: list[str] = []
        if result is not None:
            for e in result.logs:
                if isinstance(e, InputLog):
                    self._settle(slot, e.id, result)
        for entry_id, sub in list(slot.waiting.items()):
            taken = sub.run_id.done() and not sub.run_id.cancelled()
            if not taken and error is None:
                continue  # still pending: the slot's next run takes it
            if result is None or not taken:
                reason = f"internal error: {type(error).__name__}: {error}" if error is not None else "internal error"
                run_id = sub.run_id.result() if taken else ""
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
        """Take no new input; give runs in flight ``grace`` seconds; cancel the rest as shutdown."""
        self.accepting = False
        runs = [s.task for s in self.slots.values() if s.task is not None and not s.task.done()]
        if runs and grace > 0:
            log.info("waiting up to %.0fs for %d run(s) in flight", grace, len(runs))
            await asyncio.wait(runs, timeout=grace)
        for slot in list(self.slots.values()):
            slot.cancel_reason = "shutdown"
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


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

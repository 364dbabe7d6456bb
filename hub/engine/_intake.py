"""The input lifecycle, in one place: an input is recorded, queued, taken into runs in
order, answered, and resumed after a crash or a store outage.

`Intake` owns every stage of it, through the `InboxStore` seam
and the `Runner`'s queues:

- **recorded** (`Intake.submit()`): masked, then written to the inbox before anything
  else happens; a redelivered platform id is refused there (a duplicate, not answered again);
- **queued and taken into a run**: the input waits in its conversation's slot; the intake
  drives each slot, handing it to the engine (`Engine.run()`)
  until nothing is left. The engine's run takes the inputs at its step boundaries and marks
  them done when it ends;
- **in order across workers** (``lock``: workers sharing PostgreSQL): a run holds its
  conversation's lock, drops the inputs this worker no longer holds, and answers only
  inputs older than any other worker holds, so a conversation's replies keep the order of
  its messages;
- **retried after a store outage**: a run the store failed, having answered nothing, left its
  inputs in the inbox; they go to a new run after a backoff, and once those retries are
  spent, to one run every ``STRANDED_EVERY`` seconds until the store is back;
- **resumed after a crash** (`Intake.resume()`): inputs recorded but not answered
  before the last stop (or held by a worker that died) are claimed and queued again, once;
  an input the cut-off run had answered is done, one that failed too often is parked;
- **claimed from dead workers** (with ``lock``): every ``sweep_every`` seconds this worker
  renews its claims, records the runs that died with their worker, and resumes their inputs;
- **busy** (``[agent] busy``, or the persona's): a message arriving during a run joins its
  next step (``steer``), waits for a run of its own (``queue``), waits to be answered with
  all that arrived (``collect``), or stops the run, ``killed`` reason ``interrupted``, and is
  answered in the next (``interrupt``; the stopped run's messages are in its history). Every
  input is in the inbox first, so each mode keeps "nothing lost, nothing twice, in order";
- **a command** (``command=``, a ``/word`` the hub answers itself): recorded like any input,
  then answered at once by `Commands`, before any model call and without
  waiting behind the conversation's run (``/stop`` must reach the run it stops).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..backoff import Backoff
from ..definitions import CommandCall, Context, RunResult, StopRun
from ..errors import RunError, StoreError
from ..logs import InputLog, MediaPart, OutputLog
from ..store import ConversationLock, InboxStore, Pending, RunState, RunStore, park_poison
from ._runner import INTERRUPTED, Runner, Slot, Submission

if TYPE_CHECKING:
    from ..redact import Redactor
    from ..tasks import TaskGroup
    from ._commands import Commands
    from ._step_loop import Engine

__all__ = ["COMMAND_KEY", "Intake", "STORE_RETRY_ATTEMPTS"]

log = logging.getLogger("hub.engine")

COMMAND_KEY = "command"
"""The key of an input's ``meta`` that marks it as a command (``{"name", "args"}``): the
hub's own, set only by `Intake.submit()`, so an input resumed after a crash is answered
as the command it was."""

STORE_RETRY_ATTEMPTS = 10
"""How often the inputs of a run the store failed are handed to a new run (after the
hub's one backoff, 1 s doubling up to 60 s); past that, they wait in the inbox and are
handed to a new run every ``STRANDED_EVERY`` seconds until the store answers again."""

STRANDED_EVERY = 60.0
"""Seconds between tries of the inputs whose retries after a store outage are spent (one
run each time, on SQLite as on PostgreSQL): an outage of any length loses nothing, and
the inputs are answered within a minute of the store's return, not at the next start."""


class Intake:
    """The owner of every input's lifecycle (see the module doc). ``resolve`` turns a
    conversation's id into its definition, args and key (the hub's registry); ``tasks`` is
    the hub's task group, which runs each slot's driver and the claims sweep."""

    def __init__(
        self,
        *,
        inbox: InboxStore,
        runs: RunStore,
        runner: Runner,
        engine: Engine,
        tasks: TaskGroup,
        resolve: Callable[[str], tuple[Context, Any, str]],
        redactor: Redactor,
        park_after: int,
        lock: ConversationLock | None = None,
        sweep_every: float = 0.0,
        commands: Commands | None = None,
        busy_of: Callable[[Slot], str] | None = None,
    ) -> None:
        self.inbox = inbox
        self.runs = runs
        self.runner = runner
        self.engine = engine
        self.tasks = tasks
        self._resolve = resolve
        self._redactor = redactor
        self._park_after = park_after
        self._lock = lock
        self._sweep_every = sweep_every
        self.commands = commands
        self._busy_of = busy_of  # [agent] busy for a conversation (its persona's, else the config's)
        self.store_retry = Backoff(first=1.0, most=60.0)
        self.store_retry_attempts = STORE_RETRY_ATTEMPTS
        self._store_retries: dict[str, int] = {}
        # inputs whose retries are spent: tried again every `stranded_every` seconds
        self._stranded: dict[str, tuple[Slot, InputLog]] = {}
        self.stranded_every = STRANDED_EVERY
        self._claiming = asyncio.Lock()
        self._claimed_at = 0.0
        self.sweeps = 0  # completed claims sweeps (a test waits on this, not on time)

    # --- recorded and queued ------------------------------------------------------------

    async def submit(
        self,
        definition: Context,
        args: Any,
        key: str,
        data: Any,
        *,
        type: str = "text",  # noqa: A002
        user: str | None = None,
        platform_id: str | None = None,
        meta: dict[str, Any] | None = None,
        parent_id: str | None = None,
        formatted: str | None = None,
        media: Sequence[MediaPart] = (),
        command: CommandCall | None = None,
    ) -> Submission:
        """Record an input (masked) and queue it; a redelivered ``platform_id`` is a duplicate.
        With ``command`` (one that is on), it is answered as a command, not queued for the model."""
        r = self._redactor  # a pasted secret is masked here, before anything stores or shows it
        entry = InputLog(
            type=type,
            content=r.redact_tree(data),
            user=user,
            platform_id=platform_id,
            meta=dict(r.redact_tree(meta or {})),
        )
        entry.formatted = r.redact(formatted) if formatted else formatted
        for part in media:
            if not isinstance(part, MediaPart):
                raise RunError(f"media= takes hub.MediaPart references, not {part.__class__.__name__}")
        entry.media = [dataclasses.replace(p, name=r.redact(p.name)) if r else p for p in media]
        if parent_id:
            entry.meta["parent_run"] = parent_id
        entry.meta.pop(COMMAND_KEY, None)  # the hub's own mark, never a platform's
        if command is not None and self.commands is not None and self.commands.takes(command.name):
            entry.meta[COMMAND_KEY] = {"name": command.name, "args": r.redact(command.args)}
            if command.group:  # kept with the input: a command answered after a restart keeps its checks
                entry.meta[COMMAND_KEY]["group"] = True
        conversation = f"{definition.type}:{key}"
        if not await self.inbox.record(conversation, entry):
            log.info("input %s for %s already recorded: not answered again", platform_id, conversation)
            sub = Submission(None, conversation, duplicate=True)
            sub.result.cancel()
            return sub
        if COMMAND_KEY in entry.meta:
            return self._command(definition, args, key, entry)
        return self._queue(definition, args, key, entry, parent_id=parent_id)

    async def received(self, platform_id: str) -> bool:
        """Whether an input with this platform id was already recorded (a redelivery, a replay)."""
        return await self.inbox.seen(platform_id)

    def _queue(
        self, definition: Context, args: Any, key: str, entry: InputLog, *, parent_id: str | None = None
    ) -> Submission:
        """Queue a recorded input; start its slot's driver if none is going."""
        slot, sub = self.runner.queue(definition, args, key, entry, parent_id=parent_id)
        if self._busy_of is not None:
            slot.busy = self._busy_of(slot)
        if slot.interruptible() and slot.current is not None:  # a new message stops the answer in progress
            log.info("%s: run %s interrupted by a new message", slot.id, slot.current[:8])
            slot.stop_with(StopRun(RunState.KILLED, INTERRUPTED), slot.current)
        if self.runner.idle(slot):
            slot.task = self.tasks.create(self._drive(slot), name=f"run:{slot.id}")
        return sub

    # --- a command, answered at once -----------------------------------------------------

    def _command(self, definition: Context, args: Any, key: str, entry: InputLog) -> Submission:
        """Answer a recorded command input in a task of its own (not the conversation's slot)."""
        if not self.runner.accepting:
            raise RunError("the hub is shutting down and takes no new input")
        sub = Submission(entry, f"{definition.type}:{key}")
        self.tasks.create(self._answer_command(sub, definition, args, key, entry), name=f"command:{sub.context}")
        return sub

    async def _answer_command(self, sub: Submission, definition: Context, args: Any, key: str, entry: InputLog) -> None:
        assert self.commands is not None
        mark = entry.meta[COMMAND_KEY]
        call = CommandCall(str(mark.get("name", "")), str(mark.get("args", "")), group=bool(mark.get("group")))

        def started(run_id: str) -> None:
            if not sub.run_id.done():
                sub.run_id.set_result(run_id)

        try:
            result = await self.commands.answer(definition, args, key, entry, call, submit=self.submit, started=started)
        except BaseException:
            sub.run_id.cancel()
            sub.result.cancel()
            raise
        sub.run_id.cancel()  # its row was never written: a waiter is told (a no-op once set)
        sub.result.set_result(result)

    # --- taken into runs ----------------------------------------------------------------

    async def _drive(self, slot: Slot) -> None:
        """Hand ``slot`` to the engine, run after run, until nothing waits in it."""
        try:
            while slot.pending:
                slot.stop_exc, slot.current, slot.ended = None, None, None
                try:
                    result: RunResult | None = await self._run(slot)
                    error: BaseException | None = None
                except asyncio.CancelledError:
                    if slot.ended is not None:  # the run finished as it was cancelled: its inputs have their answer
                        self.runner.settle(slot, slot.ended, None)
                    self.runner.abandon(slot)
                    raise
                except Exception as e:  # a bug in the engine: every waiter still gets an answer
                    log.exception("the run of %s failed outside its own handling", slot.id)
                    result, error = None, e
                failed = self.runner.settle(slot, result, error)
                if result is not None:
                    self._after_store_outage(slot, result)
                if failed:
                    await self._answered_with_failure(slot, failed)
        finally:
            self.runner.release(slot)

    async def _run(self, slot: Slot) -> RunResult | None:
        if self._lock is None:
            return await self.engine.run(slot)
        return await self._run_in_order(slot)

    async def _answered_with_failure(self, slot: Slot, ids: list[str]) -> None:
        """Inputs answered with a failure the intake made (an engine bug): done, so that they
        are not handled again after a restart."""
        try:
            await self.inbox.done(ids)
        except Exception:
            log.exception("inbox: marking %d input(s) of %s done failed", len(ids), slot.id)

    # --- in order across workers --------------------------------------------------------

    async def _run_in_order(self, slot: Slot) -> RunResult | None:
        """The run, holding the conversation's lock across workers. The lock waits while
        another worker runs this conversation. Under the lock the run starts only once no
        older input of the conversation is held by another worker (one queued there, or a
        dead worker's until its lease lapses and it is taken over): it lets the lock go and
        waits for those to be answered first."""
        attempt, wait = 0, 0.05
        while True:
            async with AsyncExitStack() as stack:
                attempt = await self._lock_conversation(stack, slot, attempt)
                await self._keep_held(slot)
                if not slot.pending:
                    return None  # every one was another worker's: no run
                before = await self._oldest_elsewhere(slot)
                # equal times (two workers received at the same instant) both go: waiting on
                # each other would be a deadlock, and their order is not defined anyway
                if before is None or slot.pending[0].ts <= before:
                    return await self._run_older_than(slot, before)
            if await self._claimed_older(slot):
                continue  # they are ours now: run them, oldest first
            await asyncio.sleep(wait)  # the lock is let go: the older inputs' worker takes it
            wait = min(wait * 2, 1.0)

    async def _lock_conversation(self, stack: AsyncExitStack, slot: Slot, attempt: int) -> int:
        """Take the conversation's lock into ``stack``; a store that cannot give it is retried
        with the hub's backoff (the inputs stay queued here and in the inbox). Returns the
        failed attempts so far, which the next backoff continues from."""
        assert self._lock is not None
        while True:
            try:
                await stack.enter_async_context(self._lock(slot.id))
                return attempt
            except StoreError as e:
                delay = self.store_retry.delay(attempt)
                attempt += 1
                log.warning("%s: cannot take the conversation's lock (%s); retrying in %.1fs", slot.id, e, delay)
                await asyncio.sleep(delay)

    async def _run_older_than(self, slot: Slot, before: float | None) -> RunResult:
        """The run, taking only what is older than ``before``; with nothing older elsewhere,
        only what is queued now: an input that arrives after the check may have an older one
        recorded on another worker in between (the next run looks)."""
        slot.before = before if before is not None else slot.pending[-1].ts
        slot.once, slot.closed = True, False
        try:
            return await self.engine.run(slot)
        finally:
            slot.before, slot.once, slot.closed = None, False, False

    async def _claimed_older(self, slot: Slot) -> bool:
        """Claim the older inputs that nobody holds now (not at the next sweep); True when
        none is left elsewhere, so that the run can go."""
        if not self.runner.accepting:
            return False
        try:
            await self.claim_now()
        except Exception as e:  # the sweep claims them later
            log.warning("%s: claiming older inputs failed: %s", slot.id, e)
        return bool(slot.pending) and await self._oldest_elsewhere(slot) is None

    async def _oldest_elsewhere(self, slot: Slot) -> float | None:
        try:
            return await self.inbox.oldest_elsewhere(slot.id, [e.id for e in slot.pending])
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
            kept = set(await self.inbox.hold(ids))
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

    # --- retried after a store outage ---------------------------------------------------

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
                self._stranded[e.id] = (slot, e)
            log.error(
                "%d input(s) of %s failed by the store %d times; they wait in the inbox and are "
                "tried again every %.0fs until the store answers",
                len(entries),
                slot.id,
                attempt,
                self.stranded_every,
            )
            return
        for e in entries:
            self._store_retries[e.id] = attempt + 1
        delay = self.store_retry.delay(attempt)
        log.warning("%d input(s) of %s: the store failed the run; retrying in %.1fs", len(entries), slot.id, delay)
        self.tasks.create(self._retry(slot, entries, delay), name=f"store-retry:{slot.id}")

    async def _retry(self, slot: Slot, entries: list[InputLog], delay: float) -> None:
        await asyncio.sleep(delay)
        if not self.runner.accepting:
            return  # stopping: they are still in the inbox, the next start resumes them
        for e in entries:
            e.processed = False
            self._queue(slot.definition, slot.args, slot.key, e)

    # --- resumed after a crash ----------------------------------------------------------

    async def recover(self, cause: str = "was cut off by a crash") -> set[str]:
        """Record the runs cut off (by a crash, or with their worker) as ``killed``/``abnormal_exit``;
        their ids, for `resume()`."""
        killed = await self.runs.recover()
        for run in killed:
            log.warning("run %s of %s %s: killed (abnormal_exit)", run.id[:8], run.context, cause)
        return {r.id for r in killed}

    async def resume(self, killed: set[str]) -> None:
        """Inputs recorded but not handled before the last stop (or, with workers sharing
        PostgreSQL, held by a worker that died): claim them and handle them now, once. An
        input whose run was cut off after it answered is done, not answered again. A live
        reply the last run left half-written goes with its input (``InputLog.drafts``): the
        new run completes that message instead of sending a second copy. ``killed``: the runs
        `recover()` just found cut off."""
        if not self.runner.accepting:
            return  # stopping: claiming inputs this worker can no longer run would strand them
        last_runs: dict[str, _LastRun] = {}
        carried: dict[str, list[dict[str, Any]]] = {}  # input id -> drafts the last run was handed
        for p in await self.inbox.claim():
            if p.run_id is not None:
                last = last_runs.get(p.run_id)
                if last is None:
                    last = last_runs[p.run_id] = await self._last_run(p.run_id, killed, carried)
                if last.cut_off and p.entry.id in last.answered:
                    await self.inbox.done([p.entry.id])
                    continue
                # the last run's own half-written reply (which holds the drafts it adopted), or,
                # had it not begun one, the drafts it was handed
                p.entry.drafts = last.drafts() or carried.get(p.entry.id, [])
            if await park_poison(self.inbox, self.runs, p, park_after=self._park_after):
                continue  # failed too often: parked for `hub inbox`, not resumed
            self._resume_one(p)

    async def _last_run(self, run_id: str, killed: set[str], carried: dict[str, list[dict[str, Any]]]) -> _LastRun:
        """What the run that last took a pending input left in its log; the drafts its inputs
        were handed are added to ``carried``."""
        cut = run_id in killed
        if not cut:  # cut off earlier, or by another worker's recovery
            run = await self.runs.get(run_id)
            cut = run is not None and run.state == RunState.KILLED and run.reason == "abnormal_exit"
        latest: dict[str, OutputLog] = {}  # an entry is logged again as its parts go out
        taken: list[str] = []  # the run's inputs, in the order it took them
        seen_with: dict[str, int] = {}  # output id -> inputs taken when it was first logged
        for e in await self.runs.events(run_id):
            if isinstance(e, OutputLog):
                latest[e.id] = e
                seen_with.setdefault(e.id, len(taken))
            elif isinstance(e, InputLog):
                taken.append(e.id)
                if e.drafts:
                    carried[e.id] = e.drafts
        # an answer covers the inputs the run had taken when the model wrote it, not one the
        # run took after it (two messages in a row, a crash between)
        answered = {i for oid, out in latest.items() if out.answered for i in taken[: seen_with[oid]]}
        return _LastRun(cut, answered, list(latest.values()))

    def _resume_one(self, p: Pending) -> None:
        try:
            definition, args, key = self._resolve(p.context)
        except RunError as e:
            log.error("inbox: cannot resume input %s for %s: %s", p.entry.id[:8], p.context, e)
            return
        log.info("inbox: resuming input %s for %s", p.entry.id[:8], p.context)
        p.entry.processed = False
        if COMMAND_KEY in p.entry.meta and self.commands is not None:
            self._command(definition, args, key, p.entry)
            return
        self._queue(definition, args, key, p.entry)

    # --- claimed from dead workers ------------------------------------------------------

    def start_sweeping(self) -> None:
        """With workers sharing the inbox, sweep every ``sweep_every`` seconds in the hub's
        task group; with any store, try the inputs a long outage left every ``stranded_every``."""
        if self._lock is not None and self._sweep_every > 0:
            self.tasks.create(self._sweep_loop(), name="inbox-claims")
        self.tasks.create(self._stranded_loop(), name="inbox-stranded")

    def retry_stranded(self) -> int:
        """Hand the inputs whose retries after a store outage are spent to a new run (one
        try: failed by the store again, they wait for the next round); how many."""
        if not self.runner.accepting or not self._stranded:
            return 0
        stranded, self._stranded = self._stranded, {}
        for slot, e in sorted(stranded.values(), key=lambda se: se[1].ts):
            e.processed = False
            log.info("inbox: trying input %s of %s again after a store outage", e.id[:8], slot.id)
            self._queue(slot.definition, slot.args, slot.key, e)
        return len(stranded)

    async def _stranded_loop(self) -> None:
        while True:
            await asyncio.sleep(self.stranded_every)
            try:
                self.retry_stranded()
            except Exception:  # a bug here must not end the loop: the inputs would wait for a restart
                log.exception("inbox: trying the inputs a store outage left failed")

    async def sweep(self) -> None:
        """One round: renew this worker's claims, recover the dead's runs, claim and resume their inputs."""
        held = await self.inbox.renew()
        await self.resume(await self.recover("died with its worker"))
        self.sweeps += 1
        log.debug("inbox claims: %d held by this worker", held)

    async def claim_now(self) -> None:
        """What the sweep does but renewing (runs cut off recorded, inputs nobody holds
        claimed and queued), now, for a run waiting on an older input: at most one at a
        time, and not more often than twice a second however many runs wait."""
        async with self._claiming:
            if time.monotonic() - self._claimed_at < 0.5:
                return
            try:
                await self.resume(await self.recover("died with its worker"))
            finally:
                self._claimed_at = time.monotonic()

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_every)
            try:
                await self.sweep()
            except StoreError as e:  # reported by the store's health; the leases are renewed next time
                log.error("inbox claims: %s", e)
            except Exception:  # a task that dies would let this worker's leases lapse
                log.exception("inbox claims failed")


@dataclass(slots=True)
class _LastRun:
    """What the run that last took pending inputs left: whether it was cut off, the inputs an
    answer of it covered, and its outputs as last logged."""

    cut_off: bool
    answered: set[str]
    outputs: list[OutputLog]

    def drafts(self) -> list[dict[str, Any]]:
        """Its own half-written live replies, as drafts a new run completes."""
        return [{"type": e.type, "parts": e.parts} for e in self.outputs if e.live and not e.sent and e.parts]

"""Schedules: inputs sent to a context on a clock (a cron expression or an interval).

Schedules come from ``[schedules.NAME]`` in config.toml and from persona files
(``[schedules.NAME]`` there too, named ``PERSONA/NAME``; edits are picked up while the hub
runs). Each fire calls `Hub.submit()`, like any other trigger.

The last fire time of each schedule is kept in a `ScheduleStore`, so
schedules survive restarts: a fire that fell due while the hub was down runs once at start,
not once per miss. A schedule seen for the first time starts counting from that moment.

Several workers (hubs sharing one store) may run the same schedules: each tick is claimed
in the store first, by a compare-and-set of the last fire time (`claim()`),
and only the worker whose claim changed it sends the input, so a tick fires once across
workers. The input goes in with the platform id ``schedule:NAME:TICK`` and the claim is
marked done once it is recorded. A claim a worker left unfinished (it died in between) is
sent by the workers that lost the claim, and by the next worker that arms the schedule;
the inbox keeps one copy of it (the same platform id): never zero times, never twice.

A schedule with ``skip_unchanged = true`` is not sent when its input and its conversation
(the context's working memory and memory) are what they were when its last run ended: a
fingerprint of them is kept under ``schedule-fingerprint:NAME`` in the memory store once each
of its runs completes, and a fire that finds the same one is marked done without an input,
so the model is not called for nothing (``hub_schedule_skips_total{schedule}``).

The clock and the sleep function are injected, so tests drive a fake clock.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import time
import zoneinfo
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from ..config import ScheduleSection
from ..errors import ConfigError, HubError, RunError
from ..personas import PersonaSet
from ..store import InMemoryScheduleStore, MemoryStore, RunState, ScheduleStore

__all__ = ["Scheduler", "next_fire", "tick_id"]

log = logging.getLogger("hub.features")

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


def _zone(schedule: ScheduleSection) -> tzinfo | None:
    return zoneinfo.ZoneInfo(schedule.timezone) if schedule.timezone else None


def next_fire(schedule: ScheduleSection, after: float) -> float:
    """The first nominal fire time strictly after ``after`` (a Unix timestamp)."""
    interval = schedule.interval
    if interval is not None:
        return after + interval
    from croniter import croniter

    zone = _zone(schedule)
    start = datetime.fromtimestamp(after, zone) if zone else datetime.fromtimestamp(after).astimezone()
    return float(croniter(schedule.cron, start).get_next(float))


# --- the scheduler ----------------------------------------------------------------------


@dataclass(slots=True)
class _Armed:
    schedule: ScheduleSection
    due: float  # the nominal fire time
    fire_at: float  # due plus this fire's jitter
    last: float  # the store's last fire time this was armed from (what a claim expects)


def tick_id(name: str, due: float) -> str:
    """The platform id of one tick's input: the inbox refuses it a second time."""
    return f"schedule:{name}:{due:.3f}"


class Scheduler:
    """A hub component that fires every enabled schedule.

    It sends through ``submit`` (the hub's), checks the config's targets with ``resolve``
    at start, waits for ``started()`` before the first fire, and counts fires with
    ``fired(name)``. ``clock`` returns the time (Unix seconds), ``sleep`` waits; both are
    swappable until ``start``. The loop wakes at the next fire, and at least every
    ``max_sleep`` seconds to pick up schedules added or edited in persona files.
    """

    def __init__(
        self,
        store: ScheduleStore | None = None,
        *,
        schedules: Mapping[str, ScheduleSection],
        personas: PersonaSet,
        submit: Callable[..., Awaitable[Any]],
        resolve: Callable[[str], Any],
        started: Callable[[], bool],
        fired: Callable[[str], None] = lambda name: None,
        config_path: Path | None = None,
        clock: Clock = time.time,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        max_sleep: float = 60.0,
        memory: MemoryStore | None = None,
        skipped: Callable[[str], None] = lambda name: None,
    ) -> None:
        self.store: ScheduleStore = store or InMemoryScheduleStore()
        self.clock = clock
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.max_sleep = max_sleep
        self.enabled = True  # False: start does nothing (`hub chat` leaves schedules to `hub run`)
        self._config_schedules = schedules
        self._personas = personas
        self._submit = submit
        self._resolve = resolve
        self._started = started
        self._fired = fired
        self._config_path = config_path
        self._armed: dict[str, _Armed] = {}
        self._task: asyncio.Task[None] | None = None
        self._memory = memory  # the conversations' state, for skip_unchanged
        self._skipped = skipped
        self._waits: set[asyncio.Task[None]] = set()  # runs whose end records a fingerprint

    def schedules(self) -> dict[str, ScheduleSection]:
        """Every enabled schedule by name: the config's, then each persona's as ``PERSONA/NAME``."""
        personas = self._personas
        found = {name: s for name, s in self._config_schedules.items() if s.enabled}
        for pname in personas.names():
            persona = personas.get(pname)
            if persona is None:
                continue
            for name, s in persona.schedules.items():
                if s.enabled:
                    found[f"{pname}/{name}"] = s
        return found

    async def start(self, hub: Any = None) -> None:
        if self._task is not None or not self.enabled:
            return
        for name, s in self._config_schedules.items():
            try:
                self._resolve(s.context)
            except RunError as e:
                path = str(self._config_path) if self._config_path else None
                raise ConfigError(str(e), path=path, key=f"schedules.{name}.context") from e
        await self.store.open()
        self._task = asyncio.create_task(self._loop(), name="hub:scheduler")

    async def stop(self) -> None:
        task, self._task = self._task, None
        for t in (task, *self._waits):
            if t is not None:
                t.cancel()
        await asyncio.gather(*(t for t in (task, *self._waits) if t is not None), return_exceptions=True)
        self._waits.clear()
        await self.store.close()

    async def _loop(self) -> None:
        while not self._started():  # components start before the hub takes input
            await asyncio.sleep(0.01)
        while True:
            try:
                wake = await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # a failing store must not end the schedules for good
                log.exception("scheduler: pass failed; trying again in %.0fs", self.max_sleep)
                wake = self.clock() + self.max_sleep
            await self.sleep(max(0.0, wake - self.clock()))

    async def tick(self) -> float:
        """Fire what is due; returns when the next pass should run."""
        now = self.clock()
        current = self.schedules()
        for name in set(self._armed) - set(current):
            del self._armed[name]
        for name, schedule in current.items():
            armed = self._armed.get(name)
            if armed is None or armed.schedule != schedule:
                self._armed[name] = await self._arm(name, schedule, now)
        wake = now + self.max_sleep
        for name, armed in self._armed.items():
            if armed.fire_at <= now:
                armed.last = await self._fire(name, armed)
                now = self.clock()
                due = next_fire(armed.schedule, armed.last)
                # fell behind (a long stall, jitter longer than the interval): once, not a burst
                armed.due = max(due, now)
                armed.fire_at = armed.due + self._jitter(armed.schedule)
            wake = min(wake, armed.fire_at)
        return wake

    async def _arm(self, name: str, schedule: ScheduleSection, now: float) -> _Armed:
        tick = await self.store.tick(name)
        if tick is None:
            tick = await self.store.start(name, now)  # a new schedule counts from now
        if not tick.done:  # claimed by a worker that did not finish (it died, or is finishing now)
            log.info("schedule %s: the fire of %.0f was claimed but not confirmed; sending it (once)", name, tick.last)
            await self._send(name, schedule, tick.last)
        due = next_fire(schedule, tick.last)
        if due <= now:
            log.info("schedule %s: missed while the hub was down; firing once now", name)
            due = now
        return _Armed(schedule, due, due + self._jitter(schedule), tick.last)

    def _jitter(self, schedule: ScheduleSection) -> float:
        return self.rng.uniform(0, schedule.jitter) if schedule.jitter else 0.0

    async def _fire(self, name: str, armed: _Armed) -> float:
        """Claim the tick and, if this worker won it, send its input; returns the store's
        last fire time afterwards (this tick, or a later one another worker claimed)."""
        if not self._started():
            return armed.last  # stopping: not claimed, so the next start fires it as missed
        if not await self.store.claim(name, armed.last, armed.due):
            tick = await self.store.tick(name)
            if tick is None:
                return armed.last
            log.debug("schedule %s: the tick of %.0f was claimed by another worker", name, tick.last)
            if not tick.done:
                # its input is not recorded yet: the winner is sending it, or died before it did.
                # Send it too; the inbox keeps one (same platform id), so it is never lost.
                await self._send(name, armed.schedule, tick.last, quiet=True)
            return tick.last
        if await self._unchanged(name, armed.schedule):
            log.info(
                "schedule %s: its input and %s are unchanged since its last run; not sent (skip_unchanged)",
                name,
                armed.schedule.context,
            )
            self._skipped(name)
            await self.store.finish(name, armed.due)
            return armed.due
        await self._send(name, armed.schedule, armed.due)
        return armed.due

    async def wait_recorded(self) -> None:
        """Wait until the fingerprints of the runs in flight of skip_unchanged schedules are kept."""
        while self._waits:
            await asyncio.gather(*list(self._waits), return_exceptions=True)

    async def fingerprint(self, schedule: ScheduleSection) -> str | None:
        """What a ``skip_unchanged`` schedule compares: its input and its conversation's
        working memory and memory, hashed (None without a memory store)."""
        if self._memory is None:
            return None
        ctx = schedule.context
        state = [
            schedule.input,
            ctx,
            await self._memory.get(f"working-memory:{ctx}"),
            await self._memory.get(f"memory:{ctx}"),
        ]
        text = json.dumps(state, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    async def _unchanged(self, name: str, schedule: ScheduleSection) -> bool:
        if not schedule.skip_unchanged or self._memory is None:
            return False
        last = await self._memory.get(_fingerprint_key(name))
        return last is not None and last == await self.fingerprint(schedule)

    def _remember_after(self, name: str, schedule: ScheduleSection, sub: Any) -> None:
        """Once the run of this fire completes, keep the fingerprint of what it left."""
        wait = getattr(sub, "wait", None)
        if self._memory is None or wait is None:
            return

        async def record() -> None:
            result = await wait()
            if result.state != RunState.COMPLETED or self._memory is None:
                return  # a failed or skipped run: the next fire runs again
            fingerprint = await self.fingerprint(schedule)
            await self._memory.set(_fingerprint_key(name), fingerprint)

        task = asyncio.create_task(record(), name=f"hub:schedule:{name}:fingerprint")
        self._waits.add(task)
        task.add_done_callback(self._waits.discard)
        task.add_done_callback(_log_failure)

    async def _send(self, name: str, schedule: ScheduleSection, due: float, *, quiet: bool = False) -> None:
        """Send one claimed tick's input, then mark the claim done. The platform id makes the
        inbox refuse a second copy (a claim finished by another worker after a crash)."""
        log.log(
            logging.DEBUG if quiet else logging.INFO,
            "schedule %s: sending %r to %s",
            name,
            schedule.input[:60],
            schedule.context,
        )
        try:
            sub = await self._submit(
                schedule.context,
                data=schedule.input,
                type="schedule",
                meta={"schedule": name},
                platform_id=tick_id(name, due),
            )
        except HubError as e:
            # left unconfirmed: the next start (of any worker) sends it again
            log.error("schedule %s: could not send to %s: %s", name, schedule.context, e)
            return
        if not getattr(sub, "duplicate", False):
            self._fired(name)
            if schedule.skip_unchanged:
                self._remember_after(name, schedule, sub)
        await self.store.finish(name, due)


def _fingerprint_key(name: str) -> str:
    return f"schedule-fingerprint:{name}"


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("schedule fingerprint not recorded: %s", task.exception())

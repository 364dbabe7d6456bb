"""Schedules: inputs sent to a context on a clock (a cron expression or an interval).

Schedules come from ``[schedules.NAME]`` in config.toml and from persona files
(``[schedules.NAME]`` there too, named ``PERSONA/NAME``; edits are picked up while the hub
runs). Each fire calls :meth:`Hub.submit`, like any other trigger.

The last fire time of each schedule is kept in a :class:`ScheduleStore` (SQLite), so
schedules survive restarts: a fire that fell due while the hub was down runs once at start,
not once per miss. A schedule seen for the first time starts counting from that moment.

The clock and the sleep function are injected, so tests drive a fake clock.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import zoneinfo
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from .config import ScheduleSection
from .db import SqlDatabase
from .errors import ConfigError, HubError, RunError
from .persona import PersonaSet

__all__ = [
    "Scheduler",
    "ScheduleStore",
    "InMemoryScheduleStore",
    "SQLiteScheduleStore", "PostgresScheduleStore",
    "next_fire",
]

log = logging.getLogger(__name__)

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


# --- the store --------------------------------------------------------------------------


class ScheduleStore(ABC):
    """The last (nominal) fire time of each schedule, by name."""

    @abstractmethod
    async def last(self, name: str) -> float | None: ...

    @abstractmethod
    async def record(self, name: str, fired: float) -> None:
        """Durable when it returns."""

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass


class InMemoryScheduleStore(ScheduleStore):
    def __init__(self) -> None:
        self._last: dict[str, float] = {}

    async def last(self, name: str) -> float | None:
        return self._last.get(name)

    async def record(self, name: str, fired: float) -> None:
        self._last[name] = fired




class SQLiteScheduleStore(ScheduleStore):
    def __init__(self, db: SqlDatabase) -> None:
        self.db = db

    async def open(self) -> None:
        await self.db.open()

    async def last(self, name: str) -> float | None:
        row = await self.db.fetchone("SELECT last_fire FROM schedules WHERE name = ?", (name,))
        return float(row[0]) if row else None

    async def record(self, name: str, fired: float) -> None:
        await self.db.write(
            "INSERT INTO schedules (name, last_fire) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET last_fire = excluded.last_fire",
            (name, fired),
        )


class PostgresScheduleStore(SQLiteScheduleStore):
    """The same ScheduleStore on PostgreSQL (``[store] url``): the SQL is shared, the database
    is a :class:`hub.pg.PgDatabase` that several workers use at once."""


# --- the scheduler ----------------------------------------------------------------------


@dataclass(slots=True)
class _Armed:
    schedule: ScheduleSection
    due: float  # the nominal fire time
    fire_at: float  # due plus this fire's jitter


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
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
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
                await self._fire(name, armed)
                now = self.clock()
                due = next_fire(armed.schedule, armed.due)
                # fell behind (a long stall, jitter longer than the interval): once, not a burst
                armed.due = max(due, now)
                armed.fire_at = armed.due + self._jitter(armed.schedule)
            wake = min(wake, armed.fire_at)
        return wake

    async def _arm(self, name: str, schedule: ScheduleSection, now: float) -> _Armed:
        last = await self.store.last(name)
        if last is None:
            last = now  # a new schedule counts from now
            await self.store.record(name, now)
        due = next_fire(schedule, last)
        if due <= now:
            log.info("schedule %s: missed while the hub was down; firing once now", name)
            due = now
        return _Armed(schedule, due, due + self._jitter(schedule))

    def _jitter(self, schedule: ScheduleSection) -> float:
        return self.rng.uniform(0, schedule.jitter) if schedule.jitter else 0.0

    async def _fire(self, name: str, armed: _Armed) -> None:
        schedule = armed.schedule
        if not self._started():
            return  # stopping: not recorded, so the next start fires it as missed
        log.info("schedule %s: sending %r to %s", name, schedule.input[:60], schedule.context)
        try:
            await self._submit(schedule.context, data=schedule.input, type="schedule", meta={"schedule": name})
        except HubError as e:
            log.error("schedule %s: could not send to %s: %s", name, schedule.context, e)
        else:
            self._fired(name)
        # recorded after the input is (durably) in the inbox: a crash in between fires twice,
        # never zero times
        await self.store.record(name, armed.due)

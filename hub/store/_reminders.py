"""Reminders: the `ReminderStore` seam the reminders feature keeps them in
(hub/features/_reminders.py), so they survive restarts and each fire happens once across
workers.

A reminder's ``due`` is its next nominal fire. A fire is claimed by a compare-and-set of
``due`` (`ReminderStore.claim()`): the claim moves ``due`` on (or ends a one-off
reminder) and keeps the claimed time in ``pending`` until its input is recorded
(`ReminderStore.finish()`). A worker that dies in between leaves ``pending`` set, and
whoever finds it sends that input again under the same platform id, which the inbox keeps
once.

The backends: `InMemoryReminderStore` (here) and
`hub.store.sql.SqlReminderStore` (hub/store/sql/_reminders.py).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass

__all__ = ["InMemoryReminderStore", "Reminder", "ReminderStore"]


@dataclass(frozen=True, slots=True)
class Reminder:
    """One reminder: what to say (``text``), in which conversation, for whom, and when."""

    id: str
    context: str  # the conversation it was set in, TYPE:KEY: its input goes there
    user: str  # who set it ("" when the conversation has no user)
    text: str
    due: float  # the next nominal fire (Unix seconds)
    cron: str = ""  # "": once; else it repeats on this cron expression
    timezone: str = "UTC"  # the cron's time zone
    created: float = 0.0
    active: bool = True  # False: a one-off whose fire is claimed (gone once that is recorded)
    pending: float | None = None  # a claimed fire whose input is not recorded yet


class ReminderStore(ABC):
    """Every reminder, shared by every worker."""

    @abstractmethod
    async def add(self, reminder: Reminder, *, cap: int) -> bool:
        """Store ``reminder`` unless its user holds ``cap`` active ones already (0: no cap);
        one conditional statement. False, storing nothing, when the cap is reached."""

    @abstractmethod
    async def get(self, reminder_id: str) -> Reminder | None: ...

    @abstractmethod
    async def waiting(self, *, user: str | None = None, context: str | None = None) -> list[Reminder]:
        """The active reminders (of ``user``, in ``context`` when given), soonest first."""

    @abstractmethod
    async def cancel(self, reminder_id: str, *, user: str) -> bool:
        """Delete ``user``'s reminder ``reminder_id``; False when there is none of theirs."""

    @abstractmethod
    async def due(self, now: float) -> list[Reminder]:
        """The reminders with a fire due at ``now``, or a claimed fire not yet recorded."""

    @abstractmethod
    async def next_due(self) -> float | None:
        """The earliest ``due`` of an active reminder (None: none)."""

    @abstractmethod
    async def claim(self, reminder_id: str, expected: float, following: float | None) -> bool:
        """Atomically claim the fire at ``expected``: ``due`` becomes ``following`` (None: a
        one-off, no longer active) and ``pending`` ``expected``; False, changing nothing,
        when ``due`` is not ``expected`` any more, or a fire is still pending."""

    @abstractmethod
    async def finish(self, reminder_id: str, fired: float) -> None:
        """The input of the fire at ``fired`` is recorded: clear ``pending`` (a one-off is deleted)."""

    @abstractmethod
    async def forget(self, user: str, *, platform: str | None = None) -> int:
        """Delete every reminder of ``user`` (set in ``platform``'s conversations only, when
        given); returns how many."""

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass


class InMemoryReminderStore(ReminderStore):
    """One process's reminders: each method runs without an ``await``, so it is atomic."""

    def __init__(self) -> None:
        self._rows: dict[str, Reminder] = {}

    async def add(self, reminder: Reminder, *, cap: int) -> bool:
        held = sum(1 for r in self._rows.values() if r.user == reminder.user and r.active)
        if (cap and held >= cap) or reminder.id in self._rows:
            return False
        self._rows[reminder.id] = reminder
        return True

    async def get(self, reminder_id: str) -> Reminder | None:
        return self._rows.get(reminder_id)

    async def waiting(self, *, user: str | None = None, context: str | None = None) -> list[Reminder]:
        found = [
            r
            for r in self._rows.values()
            if r.active and (user is None or r.user == user) and (context is None or r.context == context)
        ]
        return sorted(found, key=lambda r: (r.due, r.id))

    async def cancel(self, reminder_id: str, *, user: str) -> bool:
        r = self._rows.get(reminder_id)
        if r is None or r.user != user:
            return False
        del self._rows[reminder_id]
        return True

    async def due(self, now: float) -> list[Reminder]:
        found = [r for r in self._rows.values() if r.pending is not None or (r.active and r.due <= now)]
        return sorted(found, key=lambda r: (r.due, r.id))

    async def next_due(self) -> float | None:
        return min((r.due for r in self._rows.values() if r.active), default=None)

    async def claim(self, reminder_id: str, expected: float, following: float | None) -> bool:
        r = self._rows.get(reminder_id)
        if r is None or not r.active or r.due != expected or r.pending is not None:
            return False
        due = following if following is not None else r.due
        self._rows[reminder_id] = dataclasses.replace(r, due=due, active=following is not None, pending=expected)
        return True

    async def finish(self, reminder_id: str, fired: float) -> None:
        r = self._rows.get(reminder_id)
        if r is None or r.pending != fired:
            return
        if r.active:
            self._rows[reminder_id] = dataclasses.replace(r, pending=None)
        else:
            del self._rows[reminder_id]

    async def forget(self, user: str, *, platform: str | None = None) -> int:
        gone = [
            k
            for k, r in self._rows.items()
            if r.user == user and (platform is None or r.context.startswith(platform + ":"))
        ]
        for k in gone:
            del self._rows[k]
        return len(gone)

"""Reminders (``[agent] reminders = true``): the model's built-in actions ``set_reminder``,
``list_reminders`` and ``cancel_reminder``, ``/reminders`` in chat, and the loop that fires
them.

A reminder is set in a conversation by a person, for a time said in their words ("tomorrow
at nine", read by ``dateparser`` in their time zone) or on a cron expression (repeating; at
most one fire every 15 minutes). Each person's time zone is the one they last named to
``set_reminder``, kept under ``timezone:USER`` in the memory store, else the conversation's
persona's ``timezone``, else ``[agent] timezone``.
At most ``[limits] reminders_per_user`` wait per person, checked by the store in the same
statement that adds one.

A fire is an input of type ``reminder`` to the conversation it was set in, so the persona
writes the reminder, and its run draws on ``[limits] background_cost_per_day``
(hub/features/_background.py). Fires are claimed in the `ReminderStore`
by a compare-and-set of the due time, so each happens once across workers; the input goes in
with the platform id ``reminder:ID:DUE``, and a claim a worker left unrecorded (it died) is
sent again by the next pass of any worker, which the inbox keeps once. A fire that fell due
while the hub was down is sent once at start, marked late; a repeating one then goes on from
now, not once per miss.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
import zoneinfo
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from ..definitions import Action, Command, CommandContext, Conversation, Extension, RunContext
from ..errors import ActionError, HubError
from ..store import MemoryStore, Reminder, ReminderStore

__all__ = ["MIN_CRON_INTERVAL", "Reminders", "check_cron", "next_cron", "parse_when", "reminder_id"]

log = logging.getLogger("hub.features")

MIN_CRON_INTERVAL = 15 * 60
"""The shortest gap between two fires of a repeating reminder (seconds)."""

LATE_AFTER = 60.0
"""A fire sent this long after its time is marked late (the hub was down, or busy)."""

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


def _zone(name: str) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as e:
        raise ActionError("set_reminder", f"unknown time zone {name!r}: give an IANA name such as Europe/Paris") from e


def parse_when(when: str, *, timezone: str, now: float) -> float:
    """The Unix time ``when`` (a person's words: "tomorrow at 9", "in 2 hours", "2026-12-01
    18:00") means in ``timezone``, relative to ``now``.

    Raises:
        ActionError: the words are not a time, or the time has passed (the model sees why).
    """
    import dateparser

    zone = _zone(timezone)
    base = datetime.fromtimestamp(now, zone).replace(tzinfo=None)  # dateparser wants a naive base
    settings: Any = {
        "TIMEZONE": timezone,
        "TO_TIMEZONE": timezone,
        "RETURN_AS_TIMEZONE_AWARE": True,
        "PREFER_DATES_FROM": "future",
        "RELATIVE_BASE": base,
    }
    found = dateparser.parse(when.strip(), settings=settings) if when.strip() else None
    if found is None:
        raise ActionError(
            "set_reminder", f"cannot read {when!r} as a time; say it like 'tomorrow at 9:00', 'in 2 hours' or a date"
        )
    at = found.timestamp()
    if at <= now:
        shown = found.strftime("%Y-%m-%d %H:%M %Z")
        raise ActionError("set_reminder", f"{when!r} is {shown}, which has passed; give a time in the future")
    return at


def next_cron(cron: str, timezone: str, after: float) -> float:
    """The first fire of ``cron`` (in ``timezone``) strictly after ``after``."""
    from croniter import croniter

    return float(croniter(cron, datetime.fromtimestamp(after, _zone(timezone))).get_next(float))


def check_cron(cron: str, *, timezone: str, now: float) -> None:
    """Refuse a cron expression that is not one, or fires more often than every 15 minutes.

    Every hour and minute a cron allows comes round within the first day it fires on, so the
    fires of that day (at most 1440) show its shortest gap exactly.

    Raises:
        ActionError: what is wrong, in words the model can act on.
    """
    from croniter import croniter

    fields = cron.split()
    if len(fields) != 5 or not croniter.is_valid(cron):
        raise ActionError(
            "set_reminder", f"{cron!r} is not a cron expression of 5 fields (minute hour day month weekday)"
        )
    it = croniter(cron, datetime.fromtimestamp(now, _zone(timezone)))
    first = prev = float(it.get_next(float))
    while prev - first < 86400 + MIN_CRON_INTERVAL:
        nxt = float(it.get_next(float))
        if nxt - prev < MIN_CRON_INTERVAL:
            gap = round((nxt - prev) / 60)
            raise ActionError(
                "set_reminder",
                f"{cron!r} fires every {gap} minutes at times; a repeating reminder may fire at most every "
                f"{MIN_CRON_INTERVAL // 60} minutes",
            )
        prev = nxt


def reminder_id(r: Reminder, due: float) -> str:
    """The platform id of one fire's input: the inbox refuses it a second time."""
    return f"reminder:{r.id}:{due:.3f}"


def _timezone_key(user: str) -> str:
    return f"timezone:{user}"


class _SetReminder(BaseModel):
    text: str = Field(description="what to remind the person of, in a few words")
    when: str = Field(
        "", description="when, in the person's words ('tomorrow at 9', 'in 20 minutes', 'on Friday at 18:00')"
    )
    repeat: str = Field(
        "", description="for a repeating reminder: a cron expression (5 fields, at most every 15 minutes); else empty"
    )
    timezone: str = Field(
        "", description="the person's time zone, as an IANA name (Europe/Paris), when they said it; else empty"
    )


class _CancelReminder(BaseModel):
    id: str = Field(description="the reminder's id, as set_reminder or list_reminders gave it")


class Reminders:
    """The reminders feature (see the module doc): a hub component (``start``/``stop``: the
    loop that fires them) and the extension of its actions and command (`extension()`).

    ``submit`` is the hub's; ``started()`` says input is taken; ``fired()`` counts a fire.
    ``clock`` and ``sleep`` are swappable until ``start``."""

    def __init__(
        self,
        store: ReminderStore,
        *,
        memory: MemoryStore,
        submit: Callable[..., Awaitable[Any]],
        started: Callable[[], bool],
        cap: int,
        timezone: str = "UTC",
        fired: Callable[[], None] = lambda: None,
        persona_zone: Callable[[Conversation], str | None] = lambda conversation: None,
        clock: Clock = time.time,
        sleep: Sleep = asyncio.sleep,
        max_sleep: float = 60.0,
    ) -> None:
        self.store = store
        self.memory = memory
        self.cap = cap
        self.timezone = timezone
        self.clock = clock
        self.sleep = sleep
        self.max_sleep = max_sleep
        self._submit = submit
        self._started = started
        self._fired = fired
        self._persona_zone = persona_zone
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # --- what people and the model do -----------------------------------------------------

    async def zone_of(self, user: str, *, default: str | None = None) -> str:
        """The time zone ``user`` last named, else ``default`` (the persona's), else ``[agent] timezone``."""
        named = await self.memory.get(_timezone_key(user)) if user else None
        return named if isinstance(named, str) and named else default or self.timezone

    async def set(
        self,
        *,
        context: str,
        user: str,
        text: str,
        when: str = "",
        repeat: str = "",
        timezone: str = "",
        default_zone: str | None = None,
    ) -> Reminder:
        """Store a reminder (see `_SetReminder` for the fields).

        Raises:
            ActionError: the time or cron is not one, has passed or repeats too often, the
                person has ``cap`` reminders already, or the text is empty.
        """
        if not text.strip():
            raise ActionError("set_reminder", "text is empty: say what to remind of")
        if timezone:
            _zone(timezone)
            if user:
                await self.memory.set(_timezone_key(user), timezone)
        zone = timezone or await self.zone_of(user, default=default_zone)
        now = self.clock()
        if repeat.strip():
            repeat = " ".join(repeat.split())
            check_cron(repeat, timezone=zone, now=now)
            due = next_cron(repeat, zone, now)
        elif when.strip():
            due = parse_when(when, timezone=zone, now=now)
        else:
            raise ActionError("set_reminder", "give when (a time) or repeat (a cron expression)")
        r = Reminder(
            id=secrets.token_hex(4),
            context=context,
            user=user,
            text=text.strip(),
            due=due,
            cron=repeat,
            timezone=zone,
            created=now,
        )
        if not await self.store.add(r, cap=self.cap):
            raise ActionError(
                "set_reminder",
                f"this person has {self.cap} reminders waiting, the most allowed ([limits] reminders_per_user); "
                "cancel one first",
            )
        self._wake.set()
        return r

    def describe(self, r: Reminder) -> dict[str, Any]:
        """A reminder as the model and /reminders show it: times in its time zone."""
        at = datetime.fromtimestamp(r.due, _zone(r.timezone))
        return {
            "id": r.id,
            "text": r.text,
            "when": at.strftime("%Y-%m-%d %H:%M %Z"),
            **({"repeats": r.cron} if r.cron else {}),
        }

    def extension(self) -> Extension:
        """The actions ``set_reminder``, ``list_reminders``, ``cancel_reminder`` and ``/reminders``."""

        async def set_reminder(args: _SetReminder, ctx: RunContext) -> dict[str, Any]:
            r = await self.set(
                context=ctx.context.id,
                user=ctx.user or "",
                text=args.text,
                when=args.when,
                repeat=args.repeat,
                timezone=args.timezone,
                default_zone=self._persona_zone(ctx.context),
            )
            return {"set": self.describe(r)}

        async def list_reminders(args: BaseModel, ctx: RunContext) -> list[dict[str, Any]]:
            return [self.describe(r) for r in await self.store.waiting(user=ctx.user or "")]

        async def cancel_reminder(args: _CancelReminder, ctx: RunContext) -> dict[str, Any]:
            if not await self.store.cancel(args.id.strip(), user=ctx.user or ""):
                raise ActionError("cancel_reminder", f"no reminder {args.id!r} of this person (see list_reminders)")
            return {"cancelled": args.id}

        async def reminders_command(cmd: CommandContext) -> str:
            mine = await self.store.waiting(user=cmd.user or "")
            if not mine:
                return "You have no reminders."
            lines = []
            for r in mine:
                d = self.describe(r)
                repeats = f" (repeats: {r.cron})" if r.cron else ""
                lines.append(f"• {d['when']}: {r.text}{repeats} [{r.id}]")
            return "Your reminders:\n" + "\n".join(lines)

        actions = [
            Action(
                name="set_reminder",
                handler=set_reminder,
                schema=_SetReminder,
                description="Remind the person later, in this conversation: once at a time they said, or "
                "repeating on a cron expression. Returns the reminder with its id and time.",
            ),
            Action(
                name="list_reminders",
                handler=list_reminders,
                description="The reminders this person has waiting: id, text, time, and cron if repeating.",
            ),
            Action(
                name="cancel_reminder",
                handler=cancel_reminder,
                schema=_CancelReminder,
                description="Cancel one of this person's reminders by its id.",
            ),
        ]
        command = Command(name="reminders", handler=reminders_command, description="Your reminders")
        return Extension(
            name="hub.reminders", actions=actions, commands=[command], description="Built-in actions: reminders."
        )

    # --- firing ---------------------------------------------------------------------------

    async def start(self, hub: Any = None) -> None:
        if self._task is not None:
            return
        await self.store.open()
        self._task = asyncio.create_task(self._loop(), name="hub:reminders")

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
            self._wake.clear()  # before the pass: a reminder set during it wakes the next
            try:
                wake = await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # a failing store must not end reminders for good
                log.exception("reminders: pass failed; trying again in %.0fs", self.max_sleep)
                wake = self.clock() + self.max_sleep
            await self._until(wake)

    async def _until(self, wake: float) -> None:
        """Sleep until ``wake``, or until a new reminder is set."""
        delay = max(0.0, wake - self.clock())
        if delay == 0.0:
            return
        sleeping = asyncio.ensure_future(self.sleep(delay))
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait((sleeping, woken), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (sleeping, woken):
                t.cancel()
            for t in (sleeping, woken):
                with contextlib.suppress(asyncio.CancelledError):
                    await t

    async def tick(self) -> float:
        """Fire what is due (and resend what a worker claimed but did not record); returns
        when the next pass should run."""
        now = self.clock()
        again = False
        for r in await self.store.due(now):
            if not self._started():
                break  # stopping: what is not claimed fires at the next start
            if r.pending is not None:  # claimed, its input not recorded: the claimer died, or is sending it
                again |= await self._send(r, r.pending, now=now, quiet=True)
                continue
            following = next_cron(r.cron, r.timezone, max(now, r.due)) if r.cron else None
            if await self.store.claim(r.id, r.due, following):
                await self._send(r, r.due, now=now)
        if again:  # a resent fire may have been due again already
            return now
        nxt = await self.store.next_due()
        return min(now + self.max_sleep, nxt) if nxt is not None else now + self.max_sleep

    async def _send(self, r: Reminder, due: float, *, now: float, quiet: bool = False) -> bool:
        """Send one claimed fire's input, then mark it recorded; False when it could not be
        sent (left pending: the next pass sends it again)."""
        late = now - due > LATE_AFTER
        at = datetime.fromtimestamp(due, _zone(r.timezone)).strftime("%Y-%m-%d %H:%M %Z")
        head = f"[reminder set for {at}, sent late: the hub was not running then]" if late else "[reminder]"
        log.log(
            logging.DEBUG if quiet else logging.INFO,
            "reminder %s: sending to %s%s",
            r.id,
            r.context,
            " (late)" if late else "",
        )
        try:
            sub = await self._submit(
                r.context,
                data=f"{head} {r.text}",
                type="reminder",
                user=r.user or None,
                meta={"reminder": r.id, "due": due, "late": late},
                platform_id=reminder_id(r, due),
            )
        except HubError as e:
            log.error("reminder %s: could not send to %s: %s", r.id, r.context, e)
            return False
        if not getattr(sub, "duplicate", False):
            self._fired()
        await self.store.finish(r.id, due)
        return True

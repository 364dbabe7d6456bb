"""The SQL of the reminders (table ``reminders``, migration 150), for SQLite and PostgreSQL
alike. A claim is one conditional statement with ``RETURNING``, so workers sharing the
database never both win a fire; the cap per person is a slot under a unique index, so they
never together pass it. The seam is hub/store/_reminders.py."""

from __future__ import annotations

from typing import Any

from .._reminders import Reminder, ReminderStore
from ._sql_store import SqlStore

__all__ = ["SqlReminderStore"]

_COLUMNS = "id, context, user_id, text, due, cron, timezone, created, active, pending"


# the lowest slot below the cap that none of the person's reminders holds
_ADD_IN_SLOT = """
INSERT INTO reminders (id, context, user_id, text, due, cron, timezone, created, active, slot)
SELECT ?, ?, ?, ?, ?, ?, ?, ?, 1, free.n FROM (
    SELECT MIN(c.n) AS n FROM (
        SELECT 0 AS n UNION ALL SELECT slot + 1 FROM reminders WHERE user_id = ? AND slot IS NOT NULL
    ) c WHERE c.n NOT IN (SELECT slot FROM reminders WHERE user_id = ? AND slot IS NOT NULL)
) free WHERE free.n IS NOT NULL AND free.n < ?
ON CONFLICT DO NOTHING RETURNING id
"""


def _fields(r: Reminder) -> tuple[Any, ...]:
    return (r.id, r.context, r.user, r.text, r.due, r.cron, r.timezone, r.created)


def _row(row: Any) -> Reminder:
    return Reminder(
        id=str(row[0]),
        context=str(row[1]),
        user=str(row[2]),
        text=str(row[3]),
        due=float(row[4]),
        cron=str(row[5]),
        timezone=str(row[6]),
        created=float(row[7]),
        active=bool(row[8]),
        pending=float(row[9]) if row[9] is not None else None,
    )


class SqlReminderStore(SqlStore, ReminderStore, store="reminders"):
    """Reminders in table ``reminders``."""

    async def add(self, reminder: Reminder, *, cap: int) -> bool:
        r = reminder
        if not cap:
            row = await self.db.fetchone(
                "INSERT INTO reminders (id, context, user_id, text, due, cron, timezone, created, active) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT DO NOTHING RETURNING id",
                (r.id, r.context, r.user, r.text, r.due, r.cron, r.timezone, r.created),
            )
            return row is not None
        # The cap is a unique slot: the lowest free one below it, or none. Two workers adding
        # at once may pick the same slot; the unique index lets one in, and the other tries
        # the next free slot: never past the cap, whatever the interleaving.
        for _ in range(cap):
            row = await self.db.fetchone(_ADD_IN_SLOT, (*_fields(r), r.user, r.user, cap))
            if row is not None:
                return True
            if await self._held(r.user) >= cap or await self.get(r.id) is not None:
                return False
        return False

    async def _held(self, user: str) -> int:
        row = await self.db.fetchone("SELECT COUNT(*) FROM reminders WHERE user_id = ? AND slot IS NOT NULL", (user,))
        return int(row[0]) if row is not None else 0

    async def get(self, reminder_id: str) -> Reminder | None:
        row = await self.db.fetchone(f"SELECT {_COLUMNS} FROM reminders WHERE id = ?", (reminder_id,))
        return _row(row) if row is not None else None

    async def waiting(self, *, user: str | None = None, context: str | None = None) -> list[Reminder]:
        where, params = ["active = 1"], []
        if user is not None:
            where.append("user_id = ?")
            params.append(user)
        if context is not None:
            where.append("context = ?")
            params.append(context)
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM reminders WHERE {' AND '.join(where)} ORDER BY due, id", tuple(params)
        )
        return [_row(r) for r in rows]

    async def cancel(self, reminder_id: str, *, user: str) -> bool:
        row = await self.db.fetchone(
            "DELETE FROM reminders WHERE id = ? AND user_id = ? RETURNING id", (reminder_id, user)
        )
        return row is not None

    async def due(self, now: float) -> list[Reminder]:
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM reminders WHERE pending IS NOT NULL OR (active = 1 AND due <= ?) ORDER BY due, id",
            (now,),
        )
        return [_row(r) for r in rows]

    async def next_due(self) -> float | None:
        row = await self.db.fetchone("SELECT MIN(due) FROM reminders WHERE active = 1", ())
        return float(row[0]) if row is not None and row[0] is not None else None

    async def claim(self, reminder_id: str, expected: float, following: float | None) -> bool:
        row = await self.db.fetchone(
            # a one-off's fire gives its slot back: the cap counts reminders still waiting
            "UPDATE reminders SET due = ?, active = ?, pending = ?, slot = CASE WHEN ? = 1 THEN slot END "
            "WHERE id = ? AND due = ? AND active = 1 AND pending IS NULL RETURNING id",
            (
                following if following is not None else expected,
                1 if following is not None else 0,
                expected,
                1 if following is not None else 0,
                reminder_id,
                expected,
            ),
        )
        return row is not None

    async def finish(self, reminder_id: str, fired: float) -> None:
        await self.db.write("DELETE FROM reminders WHERE id = ? AND pending = ? AND active = 0", (reminder_id, fired))
        await self.db.write("UPDATE reminders SET pending = NULL WHERE id = ? AND pending = ?", (reminder_id, fired))

    async def forget(self, user: str, *, platform: str | None = None) -> int:
        if platform:  # the platform's conversations: TYPE:KEY ids from "platform:" up to "platform;"
            rows = await self.db.fetchall(
                "DELETE FROM reminders WHERE user_id = ? AND context >= ? AND context < ? RETURNING id",
                (user, f"{platform}:", f"{platform};"),
            )
        else:
            rows = await self.db.fetchall("DELETE FROM reminders WHERE user_id = ? RETURNING id", (user,))
        return len(rows)

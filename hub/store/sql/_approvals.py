"""Approvals on SQLite and PostgreSQL (table ``approvals``): each move of a row's state is
one ``UPDATE ... WHERE state = ? RETURNING``, so of two workers (or a worker and ``hub
approvals approve``) answering at once exactly one gets the row back."""

from __future__ import annotations

import builtins
import json
from typing import Any

from .._approvals import Approval, ApprovalState, ApprovalStore
from ._sql_store import SqlStore
from ._values import dumps

__all__ = ["SqlApprovalStore"]

_COLUMNS = "id, key, run_id, context, action, args, state, created, expires, platform, user_id, answered, answered_by"


class SqlApprovalStore(SqlStore, ApprovalStore, store="approvals"):
    """Approvals (table ``approvals``), shared by every worker of the database."""

    async def ask(self, approval: Approval) -> Approval:
        a = approval
        await self.db.fetchone(
            f"INSERT INTO approvals ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (key) DO NOTHING RETURNING id",
            (
                a.id,
                a.key,
                a.run_id,
                a.context,
                a.action,
                dumps(a.args, default=str),
                str(a.state),
                a.created,
                a.expires,
                a.platform,
                a.user,
                a.answered,
                a.answered_by,
            ),
        )
        # a run resumed after a crash waits on the row its predecessor asked: now its own
        await self.db.fetchone(
            "UPDATE approvals SET run_id = ? WHERE key = ? AND run_id != ? AND state IN (?, ?) RETURNING id",
            (a.run_id, a.key, a.run_id, str(ApprovalState.PENDING), str(ApprovalState.APPROVED)),
        )
        row = await self.db.fetchone(f"SELECT {_COLUMNS} FROM approvals WHERE key = ?", (a.key,))
        assert row is not None
        return _approval(row)

    async def get(self, approval_id: str) -> Approval | None:
        row = await self.db.fetchone(f"SELECT {_COLUMNS} FROM approvals WHERE id = ?", (approval_id,))
        return _approval(row) if row is not None else None

    async def list(self, *, states: tuple[ApprovalState, ...] = ()) -> builtins.list[Approval]:
        if states:
            marks = ", ".join("?" for _ in states)
            rows = await self.db.fetchall(
                f"SELECT {_COLUMNS} FROM approvals WHERE state IN ({marks}) ORDER BY created, id",
                tuple(str(s) for s in states),
            )
        else:
            rows = await self.db.fetchall(f"SELECT {_COLUMNS} FROM approvals ORDER BY created, id")
        return [_approval(r) for r in rows]

    async def move(
        self,
        approval_id: str,
        frm: ApprovalState,
        to: ApprovalState,
        *,
        now: float,
        by: str | None = None,
        before_expiry: bool = False,
    ) -> bool:
        answer = frm == ApprovalState.PENDING
        row = await self.db.fetchone(
            "UPDATE approvals SET state = ?, answered = CASE WHEN ? THEN ? ELSE answered END, "
            "answered_by = CASE WHEN ? THEN ? ELSE answered_by END "
            "WHERE id = ? AND state = ? AND (? = 0 OR expires > ?) RETURNING id",
            (str(to), answer, now, answer, by, approval_id, str(frm), int(before_expiry), now),
        )
        return row is not None

    async def prune(self, before: float) -> int:
        rows = await self.db.fetchall(
            "DELETE FROM approvals WHERE state != ? AND created < ? RETURNING id", (str(ApprovalState.PENDING), before)
        )
        return len(rows)

    async def forget_user(self, user: str, *, platform: str) -> int:
        rows = await self.db.fetchall(
            "DELETE FROM approvals WHERE user_id = ? AND context >= ? AND context < ? RETURNING id",
            (user, f"{platform}:", f"{platform};"),
        )
        return len(rows)


def _approval(row: tuple[Any, ...]) -> Approval:
    return Approval(
        id=str(row[0]),
        key=str(row[1]),
        run_id=str(row[2]),
        context=str(row[3]),
        action=str(row[4]),
        args=json.loads(row[5]),
        state=ApprovalState(row[6]),
        created=float(row[7]),
        expires=float(row[8]),
        platform=row[9],
        user=row[10],
        answered=float(row[11]) if row[11] is not None else None,
        answered_by=row[12],
    )

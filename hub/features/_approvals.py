"""Approvals: an action listed in ``[approvals] actions`` (globs: ``github__*``) or declared
``@action(confirm=True)`` waits for a person's yes before it runs.

`Approvals` is a plugin whose ``authorize`` asks and waits, and the desk every answer
goes through (``hub.approvals``: a platform's buttons, ``hub approvals approve ID``,
``POST /approvals/{id}``, the dashboard). The question is a row of the
`ApprovalStore`, whose state moves forward by compare-and-set only, so:

- approving runs the action once: the run claims the approved row (``approved`` -> ``done``)
  before it calls the handler;
- denying, or no answer within ``timeout``, gives the model a denial it can react to;
- only the person who started the run (on the platform of the conversation), or a member of
  the operator role, may answer in chat; the command line, HTTP and the dashboard are
  operators;
- a question outlives a crash: the resumed run asks it again under the same content key (the
  conversation, its inputs, the action, the arguments) and waits on the same row, which may
  have been answered meanwhile; one whose time passed ends ``expired`` (the sweep), once.

An answer given in this process wakes the run at once; one given elsewhere (another worker,
``hub approvals`` beside ``hub run``) is read within ``poll`` seconds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import json
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..config import ApprovalsSection
from ..definitions import Action, ApprovalAnswer, ApprovalRequest, Approver, Output, RunContext, RunResult
from ..engine import Plugin, send_reply
from ..errors import RunError
from ..store import Approval, ApprovalState, ApprovalStore, RunStore, approval_key
from ..tasks import cancel_and_wait

__all__ = ["Approvals", "OPERATOR"]

log = logging.getLogger("hub.features")

OPERATOR = "operator"
"""Who an answer from the command line, HTTP or the dashboard is recorded as."""

_TAKEN_UP_AGAIN = ("shutdown", "cancelled")
"""Kill reasons whose input is answered again after a restart: their questions stay open."""

_SETTLED = {
    ApprovalState.APPROVED: "approved",
    ApprovalState.DENIED: "denied",
    ApprovalState.EXPIRED: "denied: no answer in time",
    ApprovalState.DONE: "approved, and it has run",
}


class Approvals(Plugin):
    """The approvals feature: a plugin (``authorize`` waits) and a component (the sweep)."""

    name = "approvals"

    def __init__(
        self,
        store: ApprovalStore,
        *,
        settings: ApprovalsSection,
        roles_of: Callable[[str, str | None], set[str]],
        approver_of: Callable[[str | None], Approver | None],
        outputs: Mapping[str, Output],
        runs: RunStore,
        poll: float = 1.0,
        sweep: float = 30.0,
        keep: float = 7 * 86400.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.settings = settings
        self._roles_of = roles_of
        self._approver_of = approver_of
        self._outputs = outputs
        self._runs = runs
        self.poll = poll
        self.sweep_every = sweep
        self.keep = keep
        self.clock = clock
        self._wake: dict[str, asyncio.Event] = {}  # approval id -> its waiting run, in this process
        self._asked: dict[str, set[str]] = {}  # run id -> the questions it waited on
        self._task: asyncio.Task[None] | None = None

    # --- which actions ask ----------------------------------------------------------------

    def needs(self, action: Action) -> bool:
        """Whether a call of ``action`` waits for a person's yes."""
        return action.confirm or any(fnmatch.fnmatchcase(action.name, glob) for glob in self.settings.actions)

    # --- the run's side -------------------------------------------------------------------

    async def authorize(self, action: Action, ctx: RunContext) -> str | None:
        if not self.needs(action) or ctx.call is None:
            return None
        now = self.clock()
        args = ctx.call.args
        fresh = Approval(
            id=secrets.token_hex(5),
            key=approval_key(ctx.context.id, [e.id for e in ctx.inputs], action.name, args),
            run_id=ctx.run.id,
            context=ctx.context.id,
            action=action.name,
            args=args,
            state=ApprovalState.PENDING,
            created=now,
            expires=now + self.settings.timeout,
            platform=ctx.context.extension,
            user=ctx.user,
        )
        row = await self.store.ask(fresh)
        request = ApprovalRequest(row.id, row.action, row.args, self._question(row), row.expires)
        wake = self._wake.setdefault(row.id, asyncio.Event())
        self._asked.setdefault(ctx.run.id, set()).add(row.id)
        ctx.pause(True)
        try:
            if row.id == fresh.id:  # asked once: a run resumed after a crash waits on the question already shown
                await self._ask(request, ctx)
            row = await self._outcome(row, wake, ctx)
        finally:
            ctx.pause(False)
            self._wake.pop(row.id, None)
        if row.state == ApprovalState.APPROVED and await self.store.move(
            row.id, ApprovalState.APPROVED, ApprovalState.DONE, now=self.clock()
        ):
            log.info("run %s: approval %s of %s: approved by %s", ctx.run.id[:8], row.id, action.name, row.answered_by)
            return None  # the one run of the action this approval allows
        return self._denial(row, action)

    def _question(self, row: Approval) -> str:
        args = json.dumps(row.args, ensure_ascii=False, sort_keys=True)
        if len(args) > 800:
            args = args[:800] + "…"
        return f"Approve {row.action} {args}? (approval {row.id})"

    async def _ask(self, request: ApprovalRequest, ctx: RunContext) -> None:
        """Show the question the platform's way, else as a plain reply naming the commands;
        a failure to show it is logged: an operator can still answer."""
        approver = self._approver_of(ctx.context.extension)
        try:
            if approver is not None:
                await approver.ask(request, ctx)
                return
            text = f"{request.text}\nAn operator answers with: hub approvals approve {request.id} (or deny)"
            await send_reply(ctx, text, outputs=self._outputs, runs=self._runs, data={"approval": request.id})
        except Exception as e:
            log.warning("approval %s: could not be shown in %s: %s", request.id, ctx.context.id, e)

    async def _outcome(self, row: Approval, wake: asyncio.Event, ctx: RunContext) -> Approval:
        """Wait until the row is answered (here: at once; elsewhere: within ``poll``) or its
        time has passed (then it is expired, once); the row as it ended."""
        while row.state == ApprovalState.PENDING:
            left = row.expires - self.clock()
            if left <= 0:
                await self.store.move(row.id, ApprovalState.PENDING, ApprovalState.EXPIRED, now=self.clock())
            else:
                try:
                    await asyncio.wait_for(wake.wait(), timeout=min(self.poll, left))
                except TimeoutError:
                    pass
                wake.clear()
            ctx.progress()
            found = await self.store.get(row.id)
            if found is None:  # pruned under a run (an operator's cleanup): never a yes
                return _replace_state(row, ApprovalState.EXPIRED)
            row = found
        approver = self._approver_of(ctx.context.extension)
        if approver is not None:
            try:
                request = ApprovalRequest(row.id, row.action, row.args, self._question(row), row.expires)
                await approver.settled(request, _SETTLED.get(row.state, str(row.state)), ctx)
            except Exception as e:
                log.info("approval %s: settling its question failed: %s", row.id, e)
        return row

    def _denial(self, row: Approval, action: Action) -> str:
        if row.state == ApprovalState.DENIED:
            return f"denied: {row.answered_by or 'someone'} did not approve {action.name!r} (approval {row.id})"
        if row.state == ApprovalState.EXPIRED:
            return f"denied: no one approved {action.name!r} within {self.settings.timeout:g}s (approval {row.id})"
        return f"not run: approval {row.id} of {action.name!r} was already used (the action ran once before)"

    async def after_run(self, result: RunResult, run: RunContext | None) -> None:
        """A run stopped while it waited (``/stop``, an operator, an interrupting message): its
        question is closed, so a later press is told so instead of approving nothing. A run
        cut off by a shutdown keeps it open: its input is answered again after the restart,
        and that run waits on the same question."""
        asked = self._asked.pop(result.run_id, set())
        if not asked or result.reason in _TAKEN_UP_AGAIN:
            return
        now = self.clock()
        for approval_id in asked:
            await self.store.move(approval_id, ApprovalState.PENDING, ApprovalState.EXPIRED, now=now)

    # --- the answering side ---------------------------------------------------------------

    async def answer(
        self,
        approval_id: str,
        *,
        approve: bool,
        user: str | None = None,
        platform: str | None = None,
        operator: bool = False,
    ) -> ApprovalAnswer:
        """One answer, from a platform (``user`` on ``platform``) or an operator. Exactly one
        answer of a question is accepted; the others are told why not."""
        row = await self.store.get(approval_id)
        if row is None:
            return ApprovalAnswer(False, "unknown", f"no approval {approval_id!r}")
        if not operator and not self._may_answer(row, user, platform):
            return ApprovalAnswer(False, str(row.state), "only the person who asked, or an operator, may answer this")
        now = self.clock()
        if row.overdue(now):
            await self.store.move(row.id, ApprovalState.PENDING, ApprovalState.EXPIRED, now=now)
            row = await self.store.get(row.id) or row
        if row.state != ApprovalState.PENDING:
            return ApprovalAnswer(False, str(row.state), f"already answered: {_SETTLED.get(row.state, row.state)}")
        to = ApprovalState.APPROVED if approve else ApprovalState.DENIED
        by = OPERATOR if operator else f"{platform}:{user}"
        if not await self.store.move(row.id, ApprovalState.PENDING, to, now=now, by=by, before_expiry=True):
            row = await self.store.get(row.id) or row
            return ApprovalAnswer(False, str(row.state), f"already answered: {_SETTLED.get(row.state, row.state)}")
        wake = self._wake.get(row.id)
        if wake is not None:
            wake.set()
        log.info("approval %s of %s: %s by %s", row.id, row.action, to, by)
        return ApprovalAnswer(True, str(to), f"{'approved' if approve else 'denied'}: {row.action}")

    async def answer_as_operator(self, approval_id: str, *, approve: bool) -> ApprovalAnswer:
        """An operator's answer (``hub approvals``, ``POST /approvals/{id}``, the dashboard).

        Raises:
            RunError: no approval has that id.
        """
        found = await self.store.get(approval_id)
        if found is None:
            raise RunError(f"no approval {approval_id!r}")
        return await self.answer(approval_id, approve=approve, operator=True)

    def _may_answer(self, row: Approval, user: str | None, platform: str | None) -> bool:
        if user is None or platform is None:
            return False
        if platform == row.platform and user == row.user:
            return True
        return self.settings.operator_role in self._roles_of(platform, user)

    async def waiting(self) -> list[Approval]:
        """The questions still open, oldest first."""
        return await self.store.list(states=(ApprovalState.PENDING,))

    # --- the sweep ------------------------------------------------------------------------

    async def start(self, hub: Any = None) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._sweep(), name="approvals:sweep")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def sweep_once(self) -> int:
        """Expire the questions whose time passed while no run waited on them (their run died
        with a worker, or the hub was down); forget settled ones past ``keep``. How many expired."""
        now = self.clock()
        expired = 0
        for row in await self.store.list(states=(ApprovalState.PENDING,)):
            if row.overdue(now) and await self.store.move(
                row.id, ApprovalState.PENDING, ApprovalState.EXPIRED, now=now
            ):
                expired += 1
                log.info("approval %s of %s: no answer in time, denied", row.id, row.action)
        await self.store.prune(now - self.keep)
        return expired

    async def _sweep(self) -> None:
        while True:
            try:
                await self.sweep_once()
            except Exception as e:  # the store is down: the next sweep tries again
                log.warning("approvals: sweep failed: %s", e)
            await asyncio.sleep(self.sweep_every)


def _replace_state(row: Approval, state: ApprovalState) -> Approval:
    return dataclasses.replace(row, state=state)

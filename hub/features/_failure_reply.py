"""The failure reply: a user whose run failed, or was killed, is told so instead of silence.

When a run ends ``failed`` or ``killed``, the person waiting for it gets the persona's
``failure_reply`` (else ``[agent] failure_reply``; ``""`` for none) through the
conversation's usual output, once, recorded in the run's log. Not for:

- a limit: it has its own reply (``[limits] reply``, `hub.features._budgets`);
- a shutdown, or a store that failed the run before it answered: the input is taken up
  again (at the next start, or once the store is back), and answered then;
- a user's own ``/stop``: its answer says so;
- a run nobody waits for: a schedule's or a webhook's (no user), or a child run (its
  parent gets the failure as a result).

The text is fixed: it never carries the error, which may hold internals (``hub trace``
has them). It is sent from ``after_run``, once the run's end is recorded and its inputs are
marked done, so a crash after it never answers the same input twice. It is an outbound
message like any other: recorded as owed (``reply:owed:<run id>`` in the memory store)
before it is sent and cleared once its send is over, so a hub killed while the platform
makes it wait (a 429) sends it once at its next start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..config import HubConfig
from ..definitions import Context, ContextInstance, Conversation, Output, RunContext, RunResult
from ..engine import INTERRUPTED, STOPPED_BY_USER, Plugin, failure_text, send_reply
from ..logs import InputLog, OutputLog
from ..personas import Persona
from ..store import MemoryStore, RunRecord, RunState, RunStore
from ._budgets import is_limit

__all__ = ["FailureReply"]

log = logging.getLogger("hub.features")

_TAKEN_UP_AGAIN = ("shutdown", "cancelled")
"""Kill reasons whose input is handled again (the next start takes it up)."""
OWED_PREFIX = "reply:owed:"
"""Memory-store keys of the failure replies recorded but not yet sent (one per run)."""


class FailureReply(Plugin):
    """A plugin (``after_run``): the failure reply, to whom it is owed (see the module doc)."""

    name = "failure_reply"

    def __init__(
        self,
        config: HubConfig,
        *,
        outputs: Mapping[str, Output],
        runs: RunStore,
        persona_for: Callable[[Conversation], Persona | None],
        owed: MemoryStore | None = None,
        resolve: Callable[[str], tuple[Context, Any, str]] | None = None,
    ) -> None:
        self.config = config
        self.outputs = outputs
        self.runs = runs
        self.persona_for = persona_for
        self.ledger = owed  # where a reply is recorded before it is sent (None: it is not)
        self.resolve = resolve  # a conversation's definition, args and key, from its id
        self._task: asyncio.Task[None] | None = None

    def owed(self, result: RunResult, ctx: RunContext) -> bool:
        """Whether this run's end is one the user is told about."""
        if result.state not in (RunState.FAILED, RunState.KILLED):
            return False
        reason = result.reason or ""
        if result.state == RunState.KILLED and (
            is_limit(reason) or reason in _TAKEN_UP_AGAIN or reason in (STOPPED_BY_USER, INTERRUPTED)
        ):
            return False
        answered = any(isinstance(e, OutputLog) and e.answered for e in result.logs)
        if result.store_failure is not None and not answered:
            return False  # its inputs wait in the inbox and are answered once the store is back
        return ctx.run.parent_id is None and any(e.user for e in ctx.inputs)

    async def after_run(self, result: RunResult, ctx: RunContext | None) -> None:
        if ctx is None or not self.owed(result, ctx):
            return
        text = failure_text(self.config, self.persona_for(ctx.context))
        if not text:
            return
        key = OWED_PREFIX + result.run_id
        if self.ledger is not None:  # committed before the send: a crash from here on sends it at the next start
            await self.ledger.set(key, {"context": ctx.context.id, "text": text, "state": str(result.state)})
        entry = await self._send(ctx, key, text, {"failure_reply": str(result.state)}, step=result.steps)
        if entry is not None:
            result.logs.append(entry)

    async def _send(self, ctx: RunContext, key: str, text: str, data: dict[str, Any], *, step: int) -> OutputLog | None:
        """Send an owed reply, then clear it: its send is over (sent, or failed for good)."""
        entry = await send_reply(ctx, text, outputs=self.outputs, runs=self.runs, data=data, step=step)
        if self.ledger is not None:
            await self.ledger.delete(key)
        if entry is not None:  # logged once it is no longer owed
            log.info(
                "run %s %s: the failure reply was %s",
                ctx.run.id[:8],
                ctx.context.id,
                "sent" if entry.sent else "not sent",
            )
        return entry

    # --- owed replies a crash left -------------------------------------------------------

    async def start(self, hub: Any = None) -> None:
        """Send the replies a killed hub owed, in the background (a platform may make them wait)."""
        if self.ledger is not None and self.resolve is not None and hub is not None and self._task is None:
            self._task = asyncio.create_task(self._send_owed(hub), name="failure-reply:owed")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()  # what it did not send stays owed, for the next start
            await asyncio.gather(task, return_exceptions=True)

    async def _send_owed(self, hub: Any) -> None:
        assert self.ledger is not None
        for key in await self.ledger.keys(OWED_PREFIX):
            try:
                value = await self.ledger.get(key)
                ctx = await self._context(hub, key[len(OWED_PREFIX) :], value)
                if ctx is None or not isinstance(value, dict):
                    await self.ledger.delete(key)
                    continue
                log.info("run %s %s: sending the failure reply a restart left owed", ctx.run.id[:8], ctx.context.id)
                await self._send(
                    ctx, key, value["text"], {"failure_reply": value.get("state", ""), "resent": True}, step=0
                )
            except asyncio.CancelledError:
                raise
            except Exception:  # the next start tries it again
                log.exception("the failure reply owed at %s was not sent", key)

    async def _context(self, hub: Any, run_id: str, value: Any) -> RunContext | None:
        """The run's context again, from its record and inputs (None: it cannot be resolved)."""
        assert self.resolve is not None
        if not isinstance(value, dict) or not isinstance(value.get("text"), str):
            return None
        try:
            definition, args, key = self.resolve(str(value.get("context", "")))
        except Exception as e:
            log.warning("the failure reply owed to run %s is dropped: %s", run_id[:8], e)
            return None
        owner = hub.owner_of(definition)
        inst = ContextInstance(definition=definition, args=args, key=key, extension=owner)
        record = await self.runs.get(run_id) or RunRecord(context=inst.id, id=run_id)
        logs = list(await self.runs.events(run_id))
        record.seq = max(record.seq, len(logs))  # the reply's entry goes after the run's own
        ctx: RunContext = RunContext(hub, record, inst, logs, runs=self.runs)
        ctx.inputs = [e for e in logs if isinstance(e, InputLog)]
        return ctx

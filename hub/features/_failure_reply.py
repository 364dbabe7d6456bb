"""The failure reply: a user whose run failed, or was killed, is told so instead of silence.

When a run ends ``failed`` or ``killed``, the person waiting for it gets the persona's
``failure_reply`` (else ``[agent] failure_reply``; ``""`` for none) through the
conversation's usual output, once, recorded in the run's log. Not for:

- a limit: it has its own reply (``[limits] reply``, :mod:`hub.features._budgets`);
- a shutdown, or a store that failed the run before it answered: the input is taken up
  again (at the next start, or once the store is back), and answered then;
- a user's own ``/stop``: its answer says so;
- a run nobody waits for: a schedule's or a webhook's (no user), or a child run (its
  parent gets the failure as a result).

The text is fixed: it never carries the error, which may hold internals (``hub trace``
has them). It is sent from ``after_run``, once the run's end is recorded and its inputs are
marked done, so a crash after it never answers the same input twice: at worst, a crash
between the two loses the reply.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from ..config import HubConfig
from ..definitions import Conversation, Output, RunContext, RunResult
from ..engine import STOPPED_BY_USER, Plugin, failure_text, send_reply
from ..logs import OutputLog
from ..personas import Persona
from ..store import RunState, RunStore
from ._budgets import is_limit

__all__ = ["FailureReply"]

log = logging.getLogger("hub.features")

_TAKEN_UP_AGAIN = ("shutdown", "cancelled")
"""Kill reasons whose input is handled again (the next start takes it up)."""


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
    ) -> None:
        self.config = config
        self.outputs = outputs
        self.runs = runs
        self.persona_for = persona_for

    def owed(self, result: RunResult, ctx: RunContext) -> bool:
        """Whether this run's end is one the user is told about."""
        if result.state not in (RunState.FAILED, RunState.KILLED):
            return False
        reason = result.reason or ""
        if result.state == RunState.KILLED and (
            is_limit(reason) or reason in _TAKEN_UP_AGAIN or reason == STOPPED_BY_USER
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
        entry = await send_reply(
            ctx,
            text,
            outputs=self.outputs,
            runs=self.runs,
            data={"failure_reply": str(result.state)},
            step=result.steps,
        )
        if entry is not None:
            result.logs.append(entry)
            log.info(
                "run %s %s: the failure reply was %s",
                result.run_id[:8],
                result.context,
                "sent" if entry.sent else "not sent",
            )

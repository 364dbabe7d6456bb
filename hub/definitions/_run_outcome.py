"""How a run ends: [`RunResult`][hub.RunResult], what [`Hub.send()`][hub.Hub.send] returns;
`StopRun`, the signal a hook or a handler raises to end a run early; and
`store_reason()`, the words of a run the store failed."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import StoreError
from ..logs import Log, OutputLog
from ..store import RunState

__all__ = ["RunResult", "StopRun", "store_reason"]


class StopRun(Exception):  # noqa: N818 - a signal that steers the loop, not an error
    """Ends a run early with a terminal state (a limit, a rejection, an orphaned child).

    Raise ``StopRun(RunState.KILLED, reason)`` in a before-run hook to end the run before its
    first step (a spent budget); inside an action it ends the whole run, not only the call.
    """

    def __init__(self, state: RunState, reason: str, *, store_failure: StoreError | None = None) -> None:
        self.state = state
        self.reason = reason
        self.store_failure = store_failure  # the store failed the run (the hub's, not a handler's choice)
        super().__init__(reason)


def store_reason(e: StoreError) -> str:
    """The reason a run the store failed ends with, in the words operators read (``store_error:
    ...``); code tells such a run by [`RunResult.store_failure`][hub.RunResult.store_failure], not by these words."""
    during = f" ({e.during})" if e.during else ""
    return f"store_error: {type(e).__name__}{during}: {e}"


@dataclass(slots=True)
class RunResult:
    """What `Hub.send()` returns: the terminal state and the whole chain of logs."""

    run_id: str
    """The run's id."""
    context: str
    """The conversation it ran in (`TYPE:KEY`)."""
    state: RunState
    """Its terminal state: [`RunState.COMPLETED`][hub.RunState.COMPLETED] unless something stopped it."""
    reason: str | None
    """Why a run that did not complete ended so; None for a completed one."""
    logs: list[Log]
    """The run's whole log, oldest first: its input, steps, calls, outputs and states."""
    steps: int = 0
    """How many steps (model calls) it took."""
    prompt_tokens: int = 0
    """Prompt tokens of all its steps."""
    completion_tokens: int = 0
    """Tokens the model wrote in all its steps."""
    duration: float = 0.0
    """Seconds from its start to its end."""
    store_failure: StoreError | None = None
    """The store error that failed the run (its inputs wait in the inbox and are retried), or None."""

    @property
    def ok(self) -> bool:
        """Whether the run completed."""
        return self.state == RunState.COMPLETED

    @property
    def outputs(self) -> list[OutputLog]:
        """Its outputs, sent or not, in order ([`OutputLog`][hub.OutputLog])."""
        return [e for e in self.logs if isinstance(e, OutputLog)]

    @property
    def text(self) -> str:
        """The text of the outputs that were sent, joined by blank lines."""
        return "\n\n".join(str(o.content) for o in self.outputs if o.sent)

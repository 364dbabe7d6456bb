"""A run as handlers see it: the conversation, the context they get, and the result.

:class:`RunContext` is what handlers and hooks get (the hub, the record, the conversation
and the call); :class:`RunResult` is what :meth:`Hub.send` returns. The engine's own object
for a run is ``hub.engine``'s ``Run``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import HubError, StoreError
from ..logs import ActionCallLog, InputLog, Log, OutputLog
from ..media import MediaLimits, RunMedia
from ..store import RunRecord, RunState

if TYPE_CHECKING:
    from ..store import RunStore

__all__ = ["Conversation", "RunContext", "RunResult", "RunRejected", "StopRun", "store_reason"]

ArgsT = TypeVar("ArgsT", bound=BaseModel)
"""A context's args (its ``schema``)."""
MemoryT = TypeVar("MemoryT")
"""A context's persistent memory (its ``memory_schema``, or what ``create`` returns)."""


class RunRejected(HubError):
    """A guardrail denied something essential: the run ends ``rejected``."""


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
    ...``); code tells such a run by :attr:`RunResult.store_failure`, not by these words."""
    during = f" ({e.during})" if e.during else ""
    return f"store_error: {type(e).__name__}{during}: {e}"


class Conversation(Protocol):
    """The conversation a run handles, as :class:`RunContext` holds it: a
    :class:`~hub.ContextInstance` (declared beside its definition, which this module's
    types are imported by)."""

    definition: Any
    args: Any
    key: str
    memory: Any
    history: list[Log]
    extension: str | None
    used: list[Any]

    @property
    def id(self) -> str: ...

    @property
    def type(self) -> str: ...


class RunContext(Generic[ArgsT, MemoryT]):
    """What handlers and hooks get: the hub, the run, the conversation and the call.

    Generic like pydantic-ai's ``RunContext[Deps]``: a handler of a ``Context[Args, Memory]``
    takes ``ctx: RunContext[Args, Memory]``, and ``ctx.args.id`` and ``ctx.memory.count``
    type-check.
    """

    __slots__ = (
        "hub",
        "run",
        "context",
        "inputs",
        "call",
        "attributes",
        "action_memory",
        "logs",
        "progress",
        "episodes",
        "_stop",
        "output",
        "_runs",
        "agent",
        "_media",
    )

    def __init__(
        self, hub: Any, run: RunRecord, context: Conversation, logs: list[Log], *, runs: RunStore | None = None
    ) -> None:
        self.hub = hub
        """The hub, for a handler that uses its public API (``ctx.hub.send``, ``ctx.hub.metrics``)."""
        self._runs = runs
        self.run = run
        self.context = context
        self.logs = logs
        self.inputs: list[InputLog] = []
        self.call: ActionCallLog | None = None
        self.attributes: BaseModel | None = None
        self.action_memory: Any = None
        self.progress: Callable[[], None] = _no_progress
        """Tell the heartbeat this run is alive (an action waiting on something long)."""
        self.episodes: list[str] = []
        """Recalled episodes, rendered, that the prompt shows (filled by a ``before_run`` hook)."""
        self._stop: Callable[[RunState, str], None] | None = None
        self.output: OutputLog | None = None
        """The output an output handler is delivering (see :meth:`part_sent`)."""
        self.agent: Any = None
        """The bot's own context as this run sees it (an ``AgentView``: ``.memory``,
        ``await .update(fn)``), or None when the bot has none."""
        self._media: RunMedia | None = None

    def stop(self, state: RunState, reason: str) -> None:
        """End this run from outside its step loop (another run, a plugin) in ``state``."""
        if self._stop is not None:
            self._stop(state, reason)

    async def part_sent(self, index: int, data: Any = None) -> None:
        """Record, durably, that part ``index`` of the output being delivered went out (a
        platform splits a long message). If the send is then cut off (a shutdown, a crash, a
        failed part), the log says which parts the user got, and the input counts as
        answered, so a restart does not send them again."""
        out = self.output
        if out is None:
            return
        out.parts.append({"index": index, "data": jsonable(data)})
        self.progress()
        snapshot = dataclasses.replace(out, parts=list(out.parts))
        runs = self._runs if self._runs is not None else self.hub.runs
        runs.append(self.run, snapshot)
        await runs.sync()

    @property
    def media(self) -> RunMedia:
        """The run's files (:class:`hub.media.RunMedia`): an output handler sends the one its
        ``src`` names with ``await ctx.media.resolve(src)``."""
        if self._media is None:  # a context built outside a run: no files, default limits
            self._media = RunMedia(MediaLimits())
        return self._media

    @media.setter
    def media(self, value: RunMedia) -> None:
        self._media = value

    @property
    def memory(self) -> MemoryT:
        """The conversation's persistent memory (saved when the run ends)."""
        return self.context.memory

    @memory.setter
    def memory(self, value: MemoryT) -> None:
        self.context.memory = value

    @property
    def args(self) -> ArgsT:
        """The conversation's args (the context's ``schema``)."""
        return self.context.args

    @property
    def user(self) -> str | None:
        return self.run.user

    def derive(self, **changes: Any) -> RunContext[ArgsT, MemoryT]:
        ctx: RunContext[ArgsT, MemoryT] = RunContext(self.hub, self.run, self.context, self.logs, runs=self._runs)
        ctx.inputs = self.inputs
        ctx.progress = self.progress
        ctx.episodes = self.episodes
        ctx._stop = self._stop
        ctx.agent = self.agent
        ctx._media = self._media
        for k, v in changes.items():
            setattr(ctx, k, v)
        return ctx


def _no_progress() -> None:
    pass


@dataclass(slots=True)
class RunResult:
    """What :meth:`Hub.send` returns: the terminal state and the whole chain of logs."""

    run_id: str
    context: str
    state: RunState
    reason: str | None
    logs: list[Log]
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration: float = 0.0
    store_failure: StoreError | None = None
    """The store error that failed the run (its inputs wait in the inbox and are retried), or None."""

    @property
    def ok(self) -> bool:
        return self.state == RunState.COMPLETED

    @property
    def outputs(self) -> list[OutputLog]:
        return [e for e in self.logs if isinstance(e, OutputLog)]

    @property
    def text(self) -> str:
        """The text of the outputs that were sent, joined by blank lines."""
        return "\n\n".join(str(o.content) for o in self.outputs if o.sent)


def validation_message(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def jsonable(value: Any) -> Any:
    """``value`` as JSON can hold it (a model dumped, an unknown object as its repr)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)

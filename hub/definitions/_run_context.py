"""A run as handlers see it: [`RunContext`][hub.RunContext], what handlers and hooks get (the hub, the
record, the conversation and the call), and the `Conversation` it holds.

The engine builds one per run (``hub.engine``'s ``Run``) and derives a copy per action call
and output ([`RunContext.derive()`][hub.RunContext.derive]). How a run ends ([`RunResult`][hub.RunResult],
``StopRun``) is `_run_outcome`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from ..logs import ActionCallLog, InputLog, Log, OutputLog, jsonable
from ..media import MediaLimits, RunMedia
from ..store import People, RunRecord, RunState

if TYPE_CHECKING:
    from ..store import RunStore
    from ._hub_api import HubAPI

__all__ = ["Conversation", "RunContext"]

ArgsT = TypeVar("ArgsT", bound=BaseModel)
"""A context's args (its ``schema``)."""
MemoryT = TypeVar("MemoryT")
"""A context's persistent memory (its ``memory_schema``, or what ``create`` returns)."""


class Conversation(Protocol):
    """The conversation a run handles, as [`RunContext`][hub.RunContext] holds it: a
    [`ContextInstance`][hub.ContextInstance] (declared beside its definition, which this module's
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
        "pause",
        "episodes",
        "_stop",
        "output",
        "_runs",
        "agent",
        "_media",
        "person",
        "person_memory",
        "person_calls",
    )

    def __init__(
        self, hub: HubAPI, run: RunRecord, context: Conversation, logs: list[Log], *, runs: RunStore | None = None
    ) -> None:
        self.hub = hub
        """The hub, for a handler that uses its public API (``ctx.hub.send``, ``ctx.hub.metrics``)."""
        self._runs = runs
        self.run = run
        """The run's record ([`RunRecord`][hub.RunRecord]): its id, its user, its totals so far."""
        self.context = context
        """The conversation the run is in: its ``id`` (``TYPE:KEY``), args, memory and history."""
        self.logs = logs
        """The run's log so far, oldest first (read it; the run appends to it)."""
        self.inputs: list[InputLog] = []
        """The inputs this run answers (more than one when several came in while it was busy)."""
        self.call: ActionCallLog | None = None
        """For an action's handler: the call being run, as the model made it; None elsewhere."""
        self.attributes: BaseModel | None = None
        """For an output's handler: the tag's attributes, validated by the output's ``attributes`` schema."""
        self.action_memory: Any = None
        """For an action declared with ``memory="name"``: its persistent value, loaded before the
        handler runs and saved after (assign to it to change it)."""
        self.progress: Callable[[], None] = _no_progress
        """Tell the heartbeat this run is alive (an action waiting on something long)."""
        self.pause: Callable[[bool], None] = _no_pause
        """``pause(True)`` while the run waits on a person (an approval): neither the heartbeat
        nor ``run_timeout`` count that time; ``pause(False)`` when the wait is over."""
        self.episodes: list[str] = []
        """Recalled episodes, rendered, that the prompt shows (filled by a ``before_run`` hook)."""
        self._stop: Callable[[RunState, str], None] | None = None
        self.output: OutputLog | None = None
        """The output an output handler is delivering (see [`part_sent()`][hub.RunContext.part_sent])."""
        self.agent: Any = None
        """The bot's own context as this run sees it (an ``AgentView``: ``.memory``,
        ``await .update(fn)``), or None when the bot has none."""
        self._media: RunMedia | None = None
        self.person: str | None = None
        """The person who speaks in this run (one human across platforms, ``hub.store.People``),
        or None: no user, or inputs from several people (then no person memory is shown)."""
        self.person_memory: dict[str, Any] = {}
        """That person's own memory, apart from the conversation's (``ctx.memory``); an action
        changes it with [`remember()`][hub.RunContext.remember], never by assigning here."""
        self.person_calls: set[str] = set()
        """The action calls that wrote the person's memory: kept out of the conversation's
        shared history, where another member of a group would read their arguments."""

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
        """The run's files (`hub.media.RunMedia`): an output handler sends the one its
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
        """Who sent the input the run answers (a platform's user id), or None."""
        return self.run.user

    async def remember(self, key: str, value: Any) -> None:
        """Keep ``key`` in the speaking person's own memory (not the conversation's), merged
        with what other runs write at the same time.

        Raises:
            ValueError: the run has no single person (no user, or several in one run).
        """
        if self.person is None:
            raise ValueError("this run has no single person to remember for")
        stored = await People(self.hub.memory).remember(self.person, key, value)
        if self.call is not None:
            self.person_calls.add(self.call.id)
        self.person_memory.clear()  # in place: the run's context and its derived copies share it
        self.person_memory.update(stored)

    def derive(self, **changes: Any) -> RunContext[ArgsT, MemoryT]:
        """A context for one call or output of this run: what the run shares (``_SHARED``),
        with the call's own fields empty, then ``changes`` applied."""
        ctx: RunContext[ArgsT, MemoryT] = object.__new__(type(self))
        for name in _SHARED:
            setattr(ctx, name, getattr(self, name))
        ctx.call = ctx.attributes = ctx.action_memory = ctx.output = None
        for k, v in changes.items():
            setattr(ctx, k, v)
        return ctx


_SHARED = (
    "hub",
    "_runs",
    "run",
    "context",
    "logs",
    "inputs",
    "progress",
    "pause",
    "episodes",
    "_stop",
    "agent",
    "_media",
    "person",
    "person_memory",
    "person_calls",
)
"""What a derived context shares with its run's: all but the call's own fields (``call``,
``attributes``, ``action_memory``, ``output``)."""


def _no_progress() -> None:
    pass


def _no_pause(on: bool) -> None:
    pass

"""Run events as they happen: the seed's "logs notify subscribers".

`EventBus` fans each run's events out to its subscribers; `PublishingRunStore`
sits in front of the hub's run store, the one place every log entry of every run passes, and
publishes what it records. A subscriber ([`EventStream`][hub.EventStream], what `Hub.events()`
returns) has a bounded buffer: when it is full, further events are dropped for that
subscriber, counted, and reported to it as one [`Dropped`][hub.Dropped] event where the gap is. The
engine never waits on a subscriber.

Events, each with a ``kind`` discriminator:

- [`RunStarted`][hub.RunStarted] (``run_started``), then one [`RunEvent`][hub.RunEvent] per log entry of the run
  (its ``kind`` is the entry's: ``input``, ``step``, ``thought``, ``action_call``,
  ``action_result``, ``output``, ``error``, ``state``), then [`RunEnded`][hub.RunEnded]
  (``run_ended``, with the terminal state). ``seq`` numbers a run's events from 1, in order;
  a run that began before anyone subscribed is announced by a ``run_started`` before its
  first event that is published.
- [`OutputPartial`][hub.OutputPartial] (``output_partial``): text a live output received while the model
  writes it (``text`` is the new part, masked, an end that could begin a secret held back;
  the parts joined are what the model wrote inside the ``<output>``, masked); the
  ``output`` event with the whole entry follows once it was delivered. Not stored: a replay from the run store has none.
- [`Dropped`][hub.Dropped] (``dropped``): ``count`` events this subscriber missed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import deque
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from .logs import ActionResultLog, InputLog, Log, OutputLog, to_dict

if TYPE_CHECKING:
    from .store import RunRecord, RunStore

__all__ = [
    "RunStarted",
    "RunEvent",
    "RunEnded",
    "OutputPartial",
    "Dropped",
    "Event",
    "EventBus",
    "EventStream",
    "PublishingRunStore",
    "event_dict",
    "KINDS",
]

KINDS = frozenset(
    {
        "run_started",
        "input",
        "step",
        "thought",
        "action_call",
        "action_result",
        "output",
        "error",
        "state",
        "output_partial",
        "run_ended",
        "dropped",
    }
)
"""Every event kind a subscriber may filter on."""


@dataclass(slots=True)
class RunStarted:
    """A run began (or, for a subscriber that came later, is announced before its first event)."""

    kind: ClassVar[Literal["run_started"]] = "run_started"
    """``"run_started"``: what the event is, to match on or to filter with ``kinds``."""
    run_id: str
    """The run's id."""
    context: str
    """The conversation the run is in (`TYPE:KEY`)."""
    seq: int
    """The event's number among its run's events, from 1, in order."""
    parent_id: str | None = None
    """The run that started this one as a child run, if any."""
    user: str | None = None
    """Who sent the input the run answers, if known."""
    ts: float = field(default_factory=time.time)
    """When it started (seconds since the epoch)."""


@dataclass(slots=True)
class RunEvent:
    """One entry of a run's log (a snapshot: later changes to the entry are later events).
    ``index`` is its position in the run's stored log (from 1), what a client that
    reconnects names to be sent what followed (``Last-Event-ID``)."""

    run_id: str
    """The run's id."""
    context: str
    """The conversation the run is in (`TYPE:KEY`)."""
    seq: int
    """The event's number among its run's events, from 1, in order."""
    entry: Log
    """The log entry, as it was when recorded."""
    index: int = 0
    """Its position in the run's stored log (from 1): a reconnecting client sends the last it saw as ``Last-
    Event-ID``."""

    @property
    def kind(self) -> str:
        """The entry's kind: ``input``, ``step``, ``thought``, ``action_call``, ... (a [`Log`][hub.Log])."""
        return self.entry.kind


@dataclass(slots=True)
class RunEnded:
    """A run reached its terminal state: the last event of a run, with its totals."""

    kind: ClassVar[Literal["run_ended"]] = "run_ended"
    """``"run_ended"``: what the event is, to match on or to filter with ``kinds``."""
    run_id: str
    """The run's id."""
    context: str
    """The conversation the run is in (`TYPE:KEY`)."""
    seq: int
    """The event's number among its run's events, from 1, in order."""
    state: str
    """The terminal state, a [`RunState`][hub.RunState] value (`completed`, `failed`, `rejected`, `killed`)."""
    reason: str | None = None
    """Why a run that did not complete ended so; None for a completed one."""
    steps: int = 0
    """How many steps (model calls) the run took."""
    prompt_tokens: int = 0
    """Prompt tokens of all its steps."""
    completion_tokens: int = 0
    """Tokens the model wrote in all its steps."""
    duration: float | None = None
    """Seconds from its start to its end, when known."""
    ts: float = field(default_factory=time.time)
    """When it ended (seconds since the epoch)."""


@dataclass(slots=True)
class OutputPartial:
    """Content that arrived inside a live output (not stored: the output's entry holds it all)."""

    kind: ClassVar[Literal["output_partial"]] = "output_partial"
    """``"output_partial"``: what the event is, to match on or to filter with ``kinds``."""
    run_id: str
    """The run's id."""
    context: str
    """The conversation the run is in (`TYPE:KEY`)."""
    seq: int
    """The event's number among its run's events, from 1, in order."""
    output_id: str
    """The id of the output's [`OutputLog`][hub.OutputLog], which follows once delivered."""
    type: str
    """The output's type."""
    text: str
    """The new text, masked; an end that could begin a secret is held back until it cannot."""
    ts: float = field(default_factory=time.time)
    """When it arrived (seconds since the epoch)."""


@dataclass(slots=True)
class Dropped:
    """This subscriber fell behind and missed ``count`` events here."""

    kind: ClassVar[Literal["dropped"]] = "dropped"
    """``"dropped"``: what the event is, to match on or to filter with ``kinds``."""
    count: int
    """How many events were dropped at this point of the stream."""


Event = RunStarted | RunEvent | RunEnded | OutputPartial | Dropped
"""Anything an [`EventStream`][hub.EventStream] yields: match on the classes or on ``kind``."""


def event_dict(event: Event) -> dict[str, Any]:
    """``event`` as JSON can hold it (for Server-Sent Events and ``--follow``)."""
    if isinstance(event, RunEvent):
        return {
            "kind": event.kind,
            "run_id": event.run_id,
            "context": event.context,
            "seq": event.seq,
            "index": event.index,
            "entry": to_dict(event.entry),
        }
    d = {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
    d["kind"] = event.kind
    return d


class EventStream:
    """One subscriber: an async iterator of events, filtered by context, run and kind.

    Use it as ``async with hub.events(run=...) as events: async for e in events``. A stream
    filtered to one run ends after that run's ``run_ended``; every stream ends when the hub
    stops or when it is closed.
    """

    def __init__(
        self,
        bus: EventBus,
        *,
        context: str | None,
        run: str | None,
        kinds: frozenset[str] | None,
        maxsize: int,
        batch: float = 0.0,
    ) -> None:
        self._bus = bus
        self.context = context
        """Only this conversation's events (``TYPE:KEY``); None: every conversation's."""
        self.run = run
        """Only this run's events, and the stream ends after its ``run_ended``; None: every run's."""
        self.kinds = kinds
        """Only events of these kinds; None: every kind."""
        self.maxsize = maxsize
        """How many unread events the stream holds before it drops further ones."""
        self._buf: deque[Event] = deque()
        self._wake = asyncio.Event()
        self._missed = 0
        self._size = 0
        self.dropped = 0
        """How many events this subscriber missed in all."""
        self._closed = False
        self.batch = batch
        """Seconds a waiting reader is left asleep after the first new event, so that it wakes
        once for a burst of events rather than once per event (what a run costs it)."""
        self._waiting = False
        self._timer: asyncio.TimerHandle | None = None

    def wants(self, run_id: str, context: str, kind: str) -> bool:
        """Whether an event of ``kind`` in the run ``run_id`` of ``context`` passes the filters."""
        return (
            (self.run is None or run_id == self.run)
            and (self.context is None or context == self.context)
            and (self.kinds is None or kind in self.kinds)
        )

    def offer(self, event: Event) -> None:
        """Called by the bus; never blocks. A full buffer drops ``event`` and counts it."""
        if self._size >= self.maxsize:  # the Dropped markers take no room
            self._missed += 1
            self.dropped += 1
            return
        if self._missed:
            self._buf.append(Dropped(self._missed))  # where the gap is, in order
            self._missed = 0
        self._buf.append(event)
        self._size += 1
        if self._waiting and self._timer is None:
            if self.batch > 0:
                self._timer = asyncio.get_running_loop().call_later(self.batch, self._fire)
            else:
                self._fire()

    def _fire(self) -> None:
        self._timer = None
        self._wake.set()

    def close(self) -> None:
        """Stop receiving; the iterator ends once what is buffered was read."""
        if not self._closed:
            self._closed = True
            self._bus._streams.discard(self)
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._wake.set()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
        while True:
            if self._buf:
                event = self._buf.popleft()
                if not isinstance(event, Dropped):
                    self._size -= 1
                if self.run is not None and isinstance(event, RunEnded):
                    self.close()
                return event
            if self._missed:
                missed, self._missed = self._missed, 0
                return Dropped(missed)
            if self._closed:
                raise StopAsyncIteration
            self._wake.clear()
            self._waiting = True
            try:
                await self._wake.wait()
            finally:
                self._waiting = False

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def aclose(self) -> None:
        """[`close()`][hub.EventStream.close], for code that closes async iterators with ``await``."""
        self.close()


class EventBus:
    """Hands each event to the streams that want it, without ever waiting on one."""

    def __init__(self) -> None:
        self._streams: set[EventStream] = set()
        self._seq: dict[str, int] = {}

    @property
    def subscribers(self) -> int:
        return len(self._streams)

    def subscribe(
        self,
        *,
        context: str | None = None,
        run: str | None = None,
        kinds: Iterable[str] | None = None,
        maxsize: int = 1000,
        batch: float = 0.01,
    ) -> EventStream:
        """A new stream; it sees events published from now on.

        Raises:
            ValueError: an unknown kind, or a ``maxsize`` below 1.
        """
        wanted = None
        if kinds is not None:
            wanted = frozenset(kinds)
            unknown = sorted(wanted - KINDS)
            if unknown:
                raise ValueError(f"unknown event kind(s) {', '.join(unknown)}; known: {', '.join(sorted(KINDS))}")
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, not {maxsize}")
        if not 0 <= batch <= 1:
            raise ValueError(f"batch must be between 0 and 1 second, not {batch}")
        stream = EventStream(self, context=context, run=run, kinds=wanted, maxsize=maxsize, batch=batch)
        self._streams.add(stream)
        return stream

    def _next(self, run_id: str) -> int:
        n = self._seq.get(run_id, 0) + 1
        self._seq[run_id] = n
        return n

    def started(self, record: RunRecord) -> None:
        if not self._streams or record.id in self._seq:  # announced already (see entry)
            return
        event = RunStarted(record.id, record.context, self._next(record.id), record.parent_id, record.user)
        self._publish(event, record.id, record.context)

    def entry(self, record: RunRecord, entry: Log) -> None:
        if not self._streams:
            return
        if record.id not in self._seq:
            # a run whose row could not be written yet (a store error), or one that began
            # before anyone subscribed: its events still begin with run_started
            self.started(record)
        snapshot = _snapshot(entry) if type(entry) in _CHANGING else entry
        event = RunEvent(record.id, record.context, self._next(record.id), snapshot, record.seq)
        self._publish(event, record.id, record.context)

    def partial(self, record: RunRecord, output_id: str, otype: str, text: str) -> None:
        """Content a live output received; costs a lookup when nobody listens."""
        if not self._streams:
            return
        if record.id not in self._seq:
            self.started(record)
        event = OutputPartial(record.id, record.context, self._next(record.id), output_id, otype, text)
        self._publish(event, record.id, record.context)

    def ended(self, record: RunRecord) -> None:
        seq = self._seq.pop(record.id, 0) + 1
        if not self._streams:
            return
        event = RunEnded(
            record.id,
            record.context,
            seq,
            str(record.state),
            record.reason,
            record.steps,
            record.prompt_tokens,
            record.completion_tokens,
            record.duration,
        )
        self._publish(event, record.id, record.context)

    def _publish(self, event: Event, run_id: str, context: str) -> None:
        for stream in tuple(self._streams):
            if stream.wants(run_id, context, event.kind):
                stream.offer(event)

    def close(self) -> None:
        """End every stream (the hub stops)."""
        for stream in tuple(self._streams):
            stream.close()
        self._seq.clear()


_FIELDS: dict[type, tuple[str, ...]] = {}
_CHANGING = (InputLog, ActionResultLog, OutputLog)
"""The entries the engine changes after logging them (``processed``, ``sent``, ``parts``); the
others are never changed, and are published as they are."""


def _snapshot(entry: Log) -> Log:
    """A shallow copy of ``entry`` (the engine may still change its flags), without the cost
    of ``dataclasses.replace``, which runs ``__init__`` and its default factories."""
    cls = type(entry)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    new = object.__new__(cls)
    for name in names:
        setattr(new, name, getattr(entry, name))
    return new


class PublishingRunStore:
    """A run store that publishes what it records: the hook of run events into the engine.

    It delegates everything to ``inner``; ``create``, ``append`` and ``finish`` also publish
    (after the inner store took the entry, so an event never shows what was not recorded).
    """

    def __init__(self, inner: RunStore, bus: EventBus) -> None:
        self.inner = inner
        self.bus = bus

    def __getattr__(self, name: str) -> Any:  # the inner store's other methods and extras
        return getattr(self.inner, name)

    async def create(self, run: RunRecord) -> None:
        await self.inner.create(run)
        self.bus.started(run)

    def create_soon(self, run: RunRecord) -> Awaitable[None]:
        pending = self.inner.create_soon(run)  # taken (queued) by the store: then published
        self.bus.started(run)
        return pending

    def append(self, run: RunRecord, entry: Log) -> None:
        self.inner.append(run, entry)
        self.bus.entry(run, entry)

    async def finish(self, run: RunRecord) -> None:
        await self.inner.finish(run)
        self.bus.ended(run)

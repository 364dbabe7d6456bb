"""Fault injection for the engine's failure paths: a store that fails its Nth call, models
whose stream breaks or is cut at the token limit, and the four checks every case makes."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

from hub import Hub, RunResult
from hub.errors import ModelError, StoreError
from hub.logs import ActionCallLog, InputLog, OutputLog
from hub.models import Model, ModelRequest, Usage
from hub.store import InboxStore, MemoryStore, RunState, RunStore
from hub.store.sql import Database, SqlInbox, SqlMemoryStore, SqlRunStore

SEND_BOUND = 10.0
"""Seconds within which ``hub.send`` must return, whatever failed."""

TERMINAL = {RunState.COMPLETED, RunState.FAILED, RunState.REJECTED, RunState.KILLED}

LIFECYCLE = {"open", "close"}


def methods(abc: type) -> list[str]:
    """The public methods of a store interface (every one a fault can hit)."""
    return sorted(
        name
        for name, fn in inspect.getmembers(abc, inspect.isfunction)
        if not name.startswith("_") and name not in LIFECYCLE
    )


STORES: dict[str, type] = {"memory": MemoryStore, "runs": RunStore, "inbox": InboxStore}


class FaultyStore:
    """Wraps a store; once armed, the Nth call of one method raises StoreError.

    Sync methods (a write-behind ``append``) raise at the call, async ones when awaited,
    as a real store does. Everything else is passed through to the store it wraps.
    """

    def __init__(self, inner: Any, interface: type) -> None:
        self.inner = inner
        self._async = {n for n in methods(interface) if inspect.iscoroutinefunction(getattr(interface, n))}
        self._armed: tuple[str, int] | None = None
        self._down = False
        self.calls: dict[str, int] = {}
        self.failed = 0

    def arm(self, method: str, nth: int, *, down: bool = False) -> None:
        """Fail the ``nth`` call of ``method`` from now on (``down``: that call and every later one)."""
        self._armed, self._down, self.calls = (method, nth), down, {}

    def disarm(self) -> None:
        self._armed = None

    def _hit(self, name: str) -> bool:
        self.calls[name] = self.calls.get(name, 0) + 1
        if self._armed is None or self._armed[0] != name:
            return False
        if self.calls[name] == self._armed[1] or (self._down and self.calls[name] > self._armed[1]):
            self.failed += 1
            return True
        return False

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if name.startswith("_") or not callable(target) or name in LIFECYCLE:
            return target
        if name in self._async:

            async def call_async(*args: Any, **kw: Any) -> Any:
                if self._hit(name):
                    raise StoreError(f"injected fault: {name} call {self.calls[name]}")
                return await target(*args, **kw)

            return call_async

        def call(*args: Any, **kw: Any) -> Any:
            if self._hit(name):
                raise StoreError(f"injected fault: {name} call {self.calls[name]}")
            return target(*args, **kw)

        return call


def faulty_sqlite_stores(db: Database) -> dict[str, FaultyStore]:
    """A FaultyStore around each of the hub's SQLite stores on ``db``, to give to ``Hub(...)``
    (the hub takes its stores when it is built; nothing is swapped afterwards)."""
    inner = {"memory": SqlMemoryStore(db), "runs": SqlRunStore(db), "inbox": SqlInbox(db)}
    return {attr: FaultyStore(inner[attr], interface) for attr, interface in STORES.items()}


class FunctionModel(Model):
    """Streams what ``fn(request)`` returns, in small chunks: a text, or (text, finish_reason),
    or (text, ModelError) to break the stream after that text."""

    name = "function"

    def __init__(self, fn: Callable[[ModelRequest], Any], *, chunk: int = 5) -> None:
        self.fn = fn
        self.chunk = chunk
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage]:
        self.requests.append(request)
        item = self.fn(request)
        text, end = (item, "stop") if isinstance(item, str) else item
        for i in range(0, len(text), self.chunk):
            await asyncio.sleep(0)
            yield text[i : i + self.chunk]
        if isinstance(end, BaseException):
            raise end
        yield Usage(len(request.system) // 4, len(text) // 4, finish_reason=end)


def boundaries(text: str) -> list[int]:
    """Every element boundary of ``text``: before each ``<`` and after each ``>``."""
    cuts = {i for i, c in enumerate(text) if c == "<"} | {i + 1 for i, c in enumerate(text) if c == ">"}
    return sorted(c for c in cuts if 0 < c < len(text))


def broken(message: str = "connection reset by peer") -> ModelError:
    return ModelError(f"injected: {message}", retryable=True)


async def send_bounded(hub: Hub, *args: Any, **kw: Any) -> RunResult:
    """``hub.send`` that must return within SEND_BOUND seconds."""
    async with asyncio.timeout(SEND_BOUND):
        result = await hub.send(*args, **kw)
    assert result is not None
    return result


async def snapshot(hub: Hub, context_id: str, run_id: str) -> tuple[Any, ...]:
    """What another conversation holds: its memory, history, run row and events."""
    runs, memory = _inner(hub.runs), _inner(hub.memory)
    row = await runs.get(run_id)
    return (
        await memory.get(f"memory:{context_id}"),
        await memory.get(f"working-memory:{context_id}"),
        (row.state, row.reason, row.steps) if row else None,
        [type(e).__name__ for e in await runs.events(run_id)],
    )


async def check(hub: Hub, result: RunResult, *, others: dict[tuple[str, str], tuple[Any, ...]]) -> None:
    """The four things every fault case asserts (the first, the bound, is send_bounded's)."""
    runs, inbox = _inner(hub.runs), _inner(hub.inbox)
    # the run row is terminal, in the state hub.send reported
    assert result.state in TERMINAL
    row = await runs.get(result.run_id)
    assert row is not None, f"no row for run {result.run_id} ({result.state}: {result.reason})"
    assert row.state == result.state and row.reason == result.reason, (
        row.state,
        row.reason,
        result.state,
        result.reason,
    )
    # the inbox is consistent: every input of a terminal run is handled, none left taken;
    # except that a run the store failed, having answered nothing, leaves its inputs there
    # for a retry once the store is back
    pending = await inbox.pending()
    if store_failed(result):
        mine = {e.id for e in result.logs if isinstance(e, InputLog)}
        assert {p.entry.id for p in pending} <= mine, [(p.context, p.run_id) for p in pending]
    else:
        assert pending == [], [(p.context, p.run_id) for p in pending]
    # other conversations' data is intact
    for (context_id, run_id), before in others.items():
        assert await snapshot(hub, context_id, run_id) == before, context_id


def store_failed(result: RunResult) -> bool:
    """The store failed the run before it answered anything (its inputs are kept)."""
    return (
        result.state == "failed"
        and result.store_failure is not None
        and not any(isinstance(e, OutputLog) and (e.sent or e.parts) for e in result.logs)
    )


def _inner(store: Any) -> Any:
    return store.inner if isinstance(store, FaultyStore) else store


def delivered(result: RunResult) -> list[str]:
    return [str(o.content) for o in result.outputs if o.sent]


def calls_of(result: RunResult, name: str) -> list[ActionCallLog]:
    return [e for e in result.logs if isinstance(e, ActionCallLog) and e.name == name]


__all__ = [
    "FaultyStore",
    "FunctionModel",
    "OutputLog",
    "STORES",
    "SEND_BOUND",
    "boundaries",
    "broken",
    "calls_of",
    "check",
    "delivered",
    "methods",
    "send_bounded",
    "snapshot",
    "store_failed",
    "faulty_sqlite_stores",
]

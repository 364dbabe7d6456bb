"""The bot's own context: state every conversation shares, prepared with every run.

A conversation's context holds what one chat remembers; the bot's own context holds what
the bot as a whole remembers (facts it learned, a running tally). It is an ordinary
[`Context`][hub.Context] (its ``create``, ``load``, ``save``, ``render``, ``memory_schema``,
``description``, ``instructions``, actions and outputs all apply), with one instance, keyed
``bot``. It is named by ``[agent] context = "TYPE"`` or declared by an extension as
``Extension(agent_context=...)``.

Every run sees the same instance, in its prompt and as ``ctx.agent``. Its memory is loaded
when the hub starts (a ``load`` or ``create`` that fails fails the start, not a user's run)
and shared in process, so concurrent runs never overwrite each other's changes with a stale
copy. Each run re-reads it first: what another worker saved is merged in (with what this
process changed and has not saved yet). `AgentContext.update()` serialises a
read-modify-write that awaits (one update at a time), and the memory is saved, like any
context memory, when a run ends: merged onto what other workers saved meanwhile
([`hub.store.MemoryStore.save_merged()`][hub.MemoryStore.save_merged]), never written over it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..definitions import ContextInstance, RunContext, load_memory, plain_json, save_memory
from ..errors import ConfigError, ExtensionError, StoreError
from ..store import RunRecord, merge3

if TYPE_CHECKING:
    from ..config import HubConfig
    from ..definitions import Context, Extension, HubAPI
    from ..store import MemoryStore

__all__ = ["AgentContext", "AgentView", "AGENT_KEY"]

AGENT_KEY = "bot"
"""The key of the bot's own context instance (``TYPE:bot``)."""


class AgentContext:
    """The one instance of the bot's own context, shared by every run of a hub."""

    def __init__(self, store: MemoryStore, definition: Context, *, extension: str | None = None) -> None:
        self.store = store
        self.definition = definition
        self.extension = extension
        try:  # its one instance's args, from the key, checked when the hub starts
            self.args = definition.args_from_key(AGENT_KEY)
        except (ValueError, ValidationError) as e:
            raise ConfigError(f"the bot's own context {definition.type!r} cannot be keyed {AGENT_KEY!r}: {e}") from e
        self.instance: ContextInstance | None = None
        self._lock = asyncio.Lock()
        self._saved: str | None = None

    @classmethod
    def resolve(
        cls,
        config: HubConfig,
        contexts: Mapping[str, Context],
        extensions: Mapping[str, Extension],
        store: MemoryStore,
        owner_of: Callable[[Any], str | None],
    ) -> AgentContext | None:
        """The hub's bot context: ``[agent] context``, else the one an extension declares.

        Raises:
            ConfigError: ``[agent] context`` names no registered context type, or two
                extensions each declare one.
        """
        name = config.agent.context
        if name:
            definition = contexts.get(name)
            if definition is None:
                known = ", ".join(sorted(contexts)) or "none"
                raise ConfigError(f"[agent] context: no context type {name!r}; known context types: {known}")
            return cls(store, definition, extension=owner_of(definition))
        declared = [(ext.name, ext.agent_context) for ext in extensions.values() if ext.agent_context is not None]
        if len(declared) > 1:
            names = ", ".join(n for n, _ in declared)
            raise ConfigError(f"extensions {names} each declare the bot's own context: name one with [agent] context")
        if not declared:
            return None
        return cls(store, declared[0][1], extension=declared[0][0])

    @property
    def id(self) -> str:
        return f"{self.definition.type}:{AGENT_KEY}"

    @property
    def memory(self) -> Any:
        """The bot's shared memory (loaded as the hub starts). Change it without awaiting in
        between, or through `update()`."""
        if self.instance is None:
            raise RuntimeError("the bot's own context is loaded as the hub starts")
        return self.instance.memory

    @memory.setter
    def memory(self, value: Any) -> None:
        if self.instance is None:
            raise RuntimeError("the bot's own context is loaded as the hub starts")
        self.instance.memory = value

    async def start(self, hub: HubAPI) -> None:
        """Load (or create) the instance as the hub starts: a broken ``load`` fails the start.

        Raises:
            StoreError: the store could not be read.
            ExtensionError: the context's ``load`` or ``create`` raised (the original chained).
        """
        d = self.definition
        inst = ContextInstance(d, self.args, d.key_of(self.args), extension=self.extension)
        ctx: RunContext = RunContext(hub, RunRecord(context=self.id), inst, [])
        try:
            await self.prepare(ctx)
        except StoreError:
            raise
        except Exception as e:
            raise ExtensionError(
                self.extension or "agent",
                f"the bot's own context {self.id} could not be loaded: {type(e).__name__}: {e}",
            ) from e

    async def prepare(self, ctx: RunContext) -> None:
        """Load (or create) the instance the first time (at start); for each later run, re-read
        it: what another worker saved since is merged into the shared instance."""
        async with self._lock:
            if self.instance is None:
                d = self.definition
                inst = ContextInstance(d, self.args, d.key_of(self.args), extension=self.extension)
                await self.store.begin(inst.id, keep=True)  # retention never prunes the bot's own memory
                inst.memory = await load_memory(self.store, inst, ctx)
                self._saved = _dump(d.memory_to(inst.memory))
                self.instance = inst
                return
            await self._refresh()

    async def _refresh(self) -> None:
        """Merge what the store holds now, if another worker saved since, into the instance
        (keeping what this process changed and has not saved)."""
        inst = self.instance
        if inst is None or not inst.versioned:
            return  # a `load` override: the context reads its own storage
        theirs, version = await self.store.get_versioned(f"memory:{inst.id}")
        if version == inst.version or theirs is None:
            return
        d = self.definition
        ours = plain_json(d.memory_to(inst.memory))
        merged = merge3(inst.base, ours, theirs, counters=d.counter_paths)
        inst.memory = d.memory_from(plain_json(merged))  # a copy: never shares a part with base
        inst.base, inst.version = theirs, version

    async def update(self, fn: Callable[[Any], Any | Awaitable[Any]], ctx: RunContext) -> Any:
        """Apply ``fn(memory)`` (sync or async) as one update and save it: a second update
        waits until the first is saved. A value ``fn`` returns replaces the memory.
        Returns the memory after the update."""
        await self.prepare(ctx)  # fresh from the store first: another worker may have saved
        async with self._lock:
            res = fn(self.memory)
            if asyncio.iscoroutine(res):
                res = await res
            if res is not None:
                self.memory = res
            await self._write(ctx)
            return self.memory

    async def save(self, ctx: RunContext) -> None:
        """Save the memory when a run ends (skipped when nothing changed since the last save)."""
        if self.instance is None:
            return
        async with self._lock:
            await self._write(ctx)

    async def _write(self, ctx: RunContext) -> None:
        inst = self.instance
        assert inst is not None
        if inst.versioned:
            # skipped when unchanged since loaded or saved; merged onto what other workers
            # saved; a change another run makes while it is awaited stays for the next save
            await save_memory(self.store, inst, ctx)
            return
        dumped = _dump(self.definition.memory_to(inst.memory))
        if dumped == self._saved and self.definition.save is None:
            return
        await save_memory(self.store, inst, ctx)
        self._saved = dumped


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class AgentView:
    """``ctx.agent``: the bot's own context as one run sees it."""

    __slots__ = ("_agent", "_ctx")

    def __init__(self, agent: AgentContext, ctx: RunContext) -> None:
        self._agent = agent
        self._ctx = ctx

    @property
    def id(self) -> str:
        return self._agent.id

    @property
    def memory(self) -> Any:
        return self._agent.memory

    @memory.setter
    def memory(self, value: Any) -> None:
        self._agent.memory = value

    async def update(self, fn: Callable[[Any], Any | Awaitable[Any]]) -> Any:
        """See `AgentContext.update()`."""
        return await self._agent.update(fn, self._ctx)

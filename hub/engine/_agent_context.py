"""The bot's own context: state every conversation shares, prepared with every run.

A conversation's context holds what one chat remembers; the bot's own context holds what
the bot as a whole remembers (facts it learned, a running tally). It is an ordinary
:class:`~hub.Context` (its ``create``, ``load``, ``save``, ``render``, ``memory_schema``,
``description``, ``instructions``, actions and outputs all apply), with one instance, keyed
``bot``. It is named by ``[agent] context = "TYPE"`` or declared by an extension as
``Extension(agent_context=...)``.

Every run sees the same instance, in its prompt and as ``ctx.agent``. Its memory is loaded
once and shared in process, so concurrent runs never overwrite each other's changes with a
stale copy; :meth:`AgentContext.update` serialises a read-modify-write that awaits (one
update at a time), and the memory is saved, like any context memory, when a run ends.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..definitions import ContextInstance, load_memory, save_memory
from ..errors import ConfigError

if TYPE_CHECKING:
    from ..config import HubConfig
    from ..definitions import Context, Extension, RunContext
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
        """The bot's shared memory (loaded by the first run). Change it without awaiting in
        between, or through :meth:`update`."""
        if self.instance is None:
            raise RuntimeError("the bot's own context is prepared with the first run")
        return self.instance.memory

    @memory.setter
    def memory(self, value: Any) -> None:
        if self.instance is None:
            raise RuntimeError("the bot's own context is prepared with the first run")
        self.instance.memory = value

    async def prepare(self, ctx: RunContext) -> None:
        """Load (or create) the instance the first time a run needs it; later runs share it."""
        if self.instance is not None:
            return
        async with self._lock:
            if self.instance is not None:
                return
            d = self.definition
            inst = ContextInstance(d, self.args, d.key_of(self.args), extension=self.extension)
            inst.memory = await load_memory(self.store, inst, ctx)
            self._saved = _dump(d.memory_to(inst.memory))
            self.instance = inst

    async def update(self, fn: Callable[[Any], Any | Awaitable[Any]], ctx: RunContext) -> Any:
        """Apply ``fn(memory)`` (sync or async) as one update and save it: a second update
        waits until the first is saved. A value ``fn`` returns replaces the memory.
        Returns the memory after the update."""
        await self.prepare(ctx)
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
        assert self.instance is not None
        dumped = _dump(self.definition.memory_to(self.instance.memory))
        if dumped == self._saved and self.definition.save is None:
            return
        await save_memory(self.store, self.instance, ctx)
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
        """See :meth:`AgentContext.update`."""
        return await self._agent.update(fn, self._ctx)

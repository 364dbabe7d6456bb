"""The key-value memory seam: context memory, working memory, action memory.

Keys follow Daydreams: ``context:<id>``, ``memory:<id>``, ``working-memory:<id>`` and
``action:<name>:<id>`` for action memory. Values are anything JSON can hold.

The backends: [`hub.InMemoryStore`][hub.InMemoryStore] (hub/store/_in_memory.py) and
`hub.store.sql.SqlMemoryStore` (hub/store/sql/_stores.py).
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ..errors import StoreError
from ._conversations import (
    CONVERSATION_PREFIXES,
    FORGOTTEN_PREFIXES,
    Forgotten,
    Generation,
    conversation_keys,
    new_generation,
)
from ._merge import Counters, counter_paths, merge3

__all__ = ["MemoryStore", "MERGE_ATTEMPTS"]

_RECORD = "conversation:"  # the default implementation's record of a conversation (a key)

MERGE_ATTEMPTS = 50
"""How often an update is tried again when other writers keep changing the value first."""


class MemoryStore(ABC):
    """Async key-value store. Every implementation passes ``tests/memory/test_store_contract.py``."""

    clock: Callable[[], float] = time.time
    """The time of activity records (a test sets its own)."""

    @abstractmethod
    async def get(self, key: str) -> Any | None:
        """The value at ``key``, or None."""

    @abstractmethod
    async def set(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable value (raises TypeError for anything else)."""

    @abstractmethod
    async def delete(self, key: str) -> None:
        """Remove ``key``; absent keys are fine."""

    @abstractmethod
    async def clear(self, prefix: str = "") -> None:
        """Remove every key (or every key starting with ``prefix``)."""

    @abstractmethod
    async def keys(self, prefix: str = "") -> list[str]:
        """Keys starting with ``prefix``, sorted."""

    # --- updates without lost writes --------------------------------------------------------

    async def get_versioned(self, key: str) -> tuple[Any | None, Any]:
        """The value at ``key`` and its version (an opaque token, None when absent), for
        [`set_if_unchanged()`][hub.MemoryStore.set_if_unchanged]. The SQL stores give a version every
        worker agrees on; this default is exact within one event loop."""
        value = await self.get(key)
        return value, _token(value)

    async def set_if_unchanged(
        self, key: str, value: Any, version: Any, *, generation: Generation | None = None
    ) -> Any | None:
        """Store ``value`` only if ``key`` is still at ``version`` (None: still absent), in one
        step no other writer can come between; the new version, or None when another writer
        changed it first (nothing is written then).

        Raises:
            Forgotten: ``generation`` is given and no longer current (nothing is written).
        """
        if generation is not None and not await self.current(generation):
            raise Forgotten(generation)
        current = await self.get(key)
        if _token(current) != version:
            return None
        await self.set(key, value)
        return _token(value)

    async def update(self, key: str, fn: Callable[[Any | None], Any | Awaitable[Any]]) -> Any:
        """Replace the value at ``key`` with ``fn(value)`` (None when absent; sync or async)
        without losing another writer's update: if one lands first, ``fn`` is applied again
        to the new value. Returns what was stored.

        Raises:
            StoreError: other writers changed the value first ``MERGE_ATTEMPTS`` times in a row.
        """
        for _ in range(MERGE_ATTEMPTS):
            value, version = await self.get_versioned(key)
            new = fn(value)
            if hasattr(new, "__await__"):
                new = await new
            if await self.set_if_unchanged(key, new, version) is not None:
                return new
        raise StoreError(
            f"memory {key!r}: changed by other writers {MERGE_ATTEMPTS} times in a row",
            store="memory",
            operation="update",
        )

    async def save_merged(
        self,
        key: str,
        value: Any,
        *,
        base: Any,
        version: Any,
        counters: Iterable[str] | Counters = frozenset(),
        generation: Generation | None = None,
    ) -> tuple[Any, Any]:
        """Save ``value``, a memory loaded as ``base`` at ``version``, without losing what other
        writers saved since: if the stored value changed, this save's changes (``base`` to
        ``value``) are merged onto it (`hub.store.merge3()`; the paths in ``counters``
        add up, every other leaf is last writer wins). Returns what was stored (``value``,
        or the merge) and its version. With ``generation``, nothing is saved once that life of
        the conversation has ended (``/new``, retention): a deleted key is not written back.

        Raises:
            StoreError: other writers changed the value first ``MERGE_ATTEMPTS`` times in a row.
            Forgotten: ``generation`` is no longer current; nothing was saved.
        """
        merged, paths = value, counter_paths(counters)
        for _ in range(MERGE_ATTEMPTS):
            if generation is None:
                saved = await self.set_if_unchanged(key, merged, version)
            else:
                saved = await self.set_if_unchanged(key, merged, version, generation=generation)
            if saved is not None:
                return merged, saved
            theirs, version = await self.get_versioned(key)
            merged = value if theirs is None else merge3(base, value, theirs, counters=paths)
        raise StoreError(
            f"memory {key!r}: changed by other writers {MERGE_ATTEMPTS} times in a row",
            store="memory",
            operation="write",
        )

    # --- conversations: last activity and generation (hub/store/_conversations.py) ------
    # These defaults keep the record as a key (``conversation:ID``), exact within one event
    # loop; the SQL store keeps it in a table and checks it in the statement of each write.

    async def begin(self, conversation: str, *, keep: bool = False) -> Generation:
        """Record activity of ``conversation`` now (a run or command starts); its current
        generation, which the run's writes are conditional on. ``keep``: never pruned (the
        bot's own context)."""
        key, now = _RECORD + conversation, self.clock()
        rec = await self.get(key)
        if not isinstance(rec, dict):
            rec = {"generation": new_generation(), "active": now, "keep": keep}
        else:
            rec = {**rec, "active": max(float(rec["active"]), now), "keep": bool(rec.get("keep")) or keep}
        await self.set(key, rec)
        return Generation(conversation, int(rec["generation"]))

    async def current(self, generation: Generation) -> bool:
        """Whether ``generation`` is still the conversation's life (no ``/new``, no prune since)."""
        rec = await self.get(_RECORD + generation.conversation)
        return isinstance(rec, dict) and rec.get("generation") == generation.number

    async def set_if_current(self, key: str, value: Any, generation: Generation) -> bool:
        """Store ``value`` at ``key`` unless ``generation`` has ended; whether it was stored."""
        if not await self.current(generation):
            return False
        await self.set(key, value)
        return True

    async def forget(self, conversation: str) -> None:
        """``/new``: end the conversation's life (a write from a run that began before is
        refused from now on), then delete its history and memory."""
        key = _RECORD + conversation
        rec = await self.get(key)
        number = int(rec["generation"]) + 1 if isinstance(rec, dict) else new_generation()
        keep = bool(rec.get("keep")) if isinstance(rec, dict) else False
        await self.set(key, {"generation": number, "active": self.clock(), "keep": keep})
        for k in conversation_keys(conversation, FORGOTTEN_PREFIXES):
            await self.delete(k)

    async def prune_idle(self, before: float, *, dry_run: bool = False) -> int:
        """Retention: delete the conversations whose last activity is before ``before`` (not
        those marked ``keep``), each with all its keys; how many conversations."""
        n = 0
        for key in await self.keys(_RECORD):
            rec = await self.get(key)
            if not isinstance(rec, dict) or rec.get("keep") or float(rec.get("active", 0)) >= before:
                continue
            n += 1
            if not dry_run:
                await self.delete(key)
                for k in conversation_keys(key[len(_RECORD) :], CONVERSATION_PREFIXES):
                    await self.delete(k)
        return n

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Open resources; idempotent."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; idempotent."""


def _token(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)

"""The key-value memory seam: context memory, working memory, action memory.

Keys follow Daydreams: ``context:<id>``, ``memory:<id>``, ``working-memory:<id>`` and
``action:<name>:<id>`` for action memory. Values are anything JSON can hold.

The backends: :class:`hub.InMemoryStore` (hub/store/_in_memory.py) and
:class:`hub.store.sql.SqlMemoryStore` (hub/store/sql/_stores.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

__all__ = ["MemoryStore"]


class MemoryStore(ABC):
    """Async key-value store. Every implementation passes ``tests/memory/test_store_contract.py``."""

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

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Open resources; idempotent."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; idempotent."""

"""The key-value memory seam: context memory, working memory, action memory.

Keys follow Daydreams: ``context:<id>``, ``memory:<id>``, ``working-memory:<id>`` and
``action:<name>:<id>`` for action memory. Values are anything JSON can hold.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

__all__ = ["MemoryStore", "InMemoryStore"]


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


class InMemoryStore(MemoryStore):
    """A dict, copying values in and out so callers never share mutable state with the store."""

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}

    async def get(self, key: str) -> Any | None:
        value = self._data.get(key)
        return _copy(value) if value is not None else None

    async def set(self, key: str, value: Any) -> None:
        try:
            stored = _copy(value)
        except _NotJson:
            _check_json(value)  # names where the value is not JSON
            raise
        self._data[key] = stored

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    async def clear(self, prefix: str = "") -> None:
        if not prefix:
            self._data.clear()
            return
        for k in [k for k in self._data if k.startswith(prefix)]:
            del self._data[k]

    async def keys(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self._data if k.startswith(prefix))


_JSON_SCALARS = (str, int, float, bool, type(None))


def _check_json(value: Any, path: str = "value") -> None:
    if isinstance(value, _JSON_SCALARS):
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_json(v, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{path}: keys must be strings, got {type(k).__name__}")
            _check_json(v, f"{path}.{k}")
        return
    raise TypeError(f"{path}: {type(value).__name__} is not JSON-serialisable")


class _NotJson(TypeError):
    pass


def _copy(value: Any) -> Any:
    """A copy of a JSON value (containers new, scalars shared: they are immutable), checking
    it on the way. One pass, a fraction of ``copy.deepcopy``'s cost (its memo and dispatch),
    which a turn paid three times when saving memory. Raises :class:`_NotJson`."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _NotJson(k)
            out[k] = v if isinstance(v, _JSON_SCALARS) else _copy(v)
        return out
    if isinstance(value, list):
        return [v if isinstance(v, _JSON_SCALARS) else _copy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(v if isinstance(v, _JSON_SCALARS) else _copy(v) for v in value)
    if isinstance(value, _JSON_SCALARS):
        return value
    raise _NotJson(value)

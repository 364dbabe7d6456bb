"""Persona revisions: the `RevisionStore` seam, every accepted version of every persona
file (hub/personas records them, lists them and rolls them back).

The backends: `hub.store.InMemoryRevisionStore` (hub/store/_in_memory.py) and
`hub.store.sql.SqlRevisionStore` (hub/store/sql/_stores.py).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass

__all__ = ["Revision", "RevisionStore", "text_hash"]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(slots=True, frozen=True)
class Revision:
    name: str
    rev: int
    text: str
    ts: float
    note: str = ""

    @property
    def sha(self) -> str:
        return text_hash(self.text)


class RevisionStore(ABC):
    """Where persona revisions live. ``record`` never blocks the loop (it is called from a
    persona lookup); ``flush`` waits until what was recorded is durable."""

    @abstractmethod
    def record(self, name: str, text: str, *, note: str = "") -> None:
        """Add a revision, numbered after the latest, unless its text equals the latest's."""

    @abstractmethod
    async def history(self, name: str) -> list[Revision]:
        """Oldest first."""

    @abstractmethod
    async def names(self) -> list[str]: ...

    async def get(self, name: str, rev: int) -> Revision | None:
        for r in await self.history(name):
            if r.rev == rev:
                return r
        return None

    async def flush(self) -> None:  # noqa: B027
        pass

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass

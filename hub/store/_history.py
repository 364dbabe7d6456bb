"""Message history: the `HistoryStore` seam, what people said and what the bot answered
them, one entry a message, indexed for full-text search (``search_history``, the dashboard).

Each entry belongs to one person (``user``): their own message, or the bot's answer to them.
A search names the person, so it never reaches another's messages, even in a group they share.
The search text is read as words, never as query syntax: `search_terms()` keeps only the
words of it (FTS operators, quotes, ``%`` and ``_`` are not words), and each backend quotes them.

The backends: `InMemoryHistoryStore` (here), `hub.store.sql.SqlHistoryStore`
(SQLite, FTS5) and `hub.store.sql.PostgresHistoryStore` (tsvector and a GIN index).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["HistoryEntry", "HistoryHit", "HistoryStore", "InMemoryHistoryStore", "search_terms"]

Role = Literal["user", "bot"]

MAX_TERMS = 16
"""Words of a search text that are looked for (the rest are dropped)."""

_WORD = re.compile(r"[^\W_]+")  # letters and digits: "_" separates words, as the indexes' tokenizers do


def search_terms(text: str) -> list[str]:
    """The words ``text`` is searched for, lowercased, each once, in order (at most 16)."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(text.lower()):
        seen.setdefault(w, None)
    return list(seen)[:MAX_TERMS]


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One message: a person's (``role="user"``) or the bot's answer to them (``"bot"``)."""

    run_id: str
    context: str  # the conversation, TYPE:KEY
    user: str  # whose conversation: the person who wrote it, or whom the bot answered
    role: Role
    text: str
    ts: float


@dataclass(frozen=True, slots=True)
class HistoryHit:
    """A search's match: where and when, who said it, the words around the match, its rank."""

    run_id: str
    context: str
    role: Role
    ts: float
    snippet: str  # the matched words in [brackets]
    rank: float  # higher is better


class HistoryStore(ABC):
    """Every message kept for search, shared by every worker."""

    @abstractmethod
    async def add(self, entries: Sequence[HistoryEntry]) -> None:
        """Keep ``entries`` (indexed when this returns)."""

    @abstractmethod
    async def search(self, user: str, text: str, *, limit: int = 10) -> list[HistoryHit]:
        """``user``'s messages and the bot's answers to them holding any word of ``text``,
        best first; [] when ``text`` has no word."""

    @abstractmethod
    async def runs_matching(self, text: str, *, limit: int = 1000) -> list[str]:
        """The ids of the runs whose messages hold every word of ``text`` (the dashboard's search)."""

    @abstractmethod
    async def forget(self, user: str, *, platform: str | None = None) -> int:
        """Delete every entry of ``user`` (in the conversations of ``platform`` only, when
        given); returns how many."""

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass


def snippet(text: str, terms: Sequence[str], width: int = 12) -> str:
    """The words of ``text`` around its first matching word, matches in [brackets]."""
    words = text.split()
    marked = [f"[{w}]" if set(search_terms(w)) & set(terms) else w for w in words]
    first = next((i for i, w in enumerate(marked) if w.startswith("[")), 0)
    start = max(0, first - width // 2)
    cut = marked[start : start + width]
    return ("…" if start > 0 else "") + " ".join(cut) + ("…" if start + width < len(words) else "")


class InMemoryHistoryStore(HistoryStore):
    """One process's history; ranked by how many of the words a message holds."""

    def __init__(self) -> None:
        self._entries: list[HistoryEntry] = []

    async def add(self, entries: Sequence[HistoryEntry]) -> None:
        self._entries.extend(entries)

    def _scored(self, terms: list[str], user: str | None) -> list[tuple[int, HistoryEntry]]:
        out = []
        for e in self._entries:
            if user is not None and e.user != user:
                continue
            words = set(search_terms(e.text)) if terms else set()
            score = len(words & set(terms))
            if score:
                out.append((score, e))
        return out

    async def search(self, user: str, text: str, *, limit: int = 10) -> list[HistoryHit]:
        terms = search_terms(text)
        scored = sorted(self._scored(terms, user), key=lambda p: (-p[0], -p[1].ts))
        return [
            HistoryHit(e.run_id, e.context, e.role, e.ts, snippet(e.text, terms), float(score))
            for score, e in scored[:limit]
        ]

    async def runs_matching(self, text: str, *, limit: int = 1000) -> list[str]:
        terms = search_terms(text)
        found: dict[str, None] = {}
        for score, e in self._scored(terms, None):
            if score == len(terms):
                found.setdefault(e.run_id, None)
        return list(found)[:limit]

    async def forget(self, user: str, *, platform: str | None = None) -> int:
        before = len(self._entries)
        prefix = f"{platform}:" if platform else ""
        self._entries = [e for e in self._entries if not (e.user == user and e.context.startswith(prefix))]
        return before - len(self._entries)

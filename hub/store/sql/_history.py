"""The SQL of the message history (table ``history``, migration 151): on SQLite an FTS5 index
(``history_fts``, kept in sync by triggers) ranked by bm25, on PostgreSQL a ``tsvector``
column with a GIN index ranked by ``ts_rank``. The search text reaches neither as syntax: only
its words (`search_terms()`, letters and digits) go in, each quoted as a
phrase on SQLite and as a lexeme on PostgreSQL. The seam is hub/store/_history.py."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

from .._history import HistoryEntry, HistoryHit, HistoryStore, Role, search_terms
from ._sql_store import SqlStore

__all__ = ["PostgresHistoryStore", "SqlHistoryStore"]

_INSERT = "INSERT INTO history (run_id, context, user_id, role, text, ts) VALUES (?, ?, ?, ?, ?, ?)"


def _hit(row: Any) -> HistoryHit:
    return HistoryHit(str(row[0]), str(row[1]), cast(Role, row[2]), float(row[3]), str(row[4]), float(row[5]))


class SqlHistoryStore(SqlStore, HistoryStore, store="history"):
    """SQLite: FTS5."""

    async def add(self, entries: Sequence[HistoryEntry]) -> None:
        # queued together: the group commit makes them one transaction
        await asyncio.gather(
            *(self.db.submit(_INSERT, (e.run_id, e.context, e.user, e.role, e.text, e.ts)) for e in entries)
        )

    @staticmethod
    def _match(terms: list[str], joiner: str) -> str:
        return joiner.join(f'"{t}"' for t in terms)  # a phrase each: no word is an operator

    async def search(self, user: str, text: str, *, limit: int = 10) -> list[HistoryHit]:
        terms = search_terms(text)
        if not terms:
            return []
        rows = await self.db.fetchall(
            "SELECT h.run_id, h.context, h.role, h.ts, snippet(history_fts, 0, '[', ']', '…', 12), "
            "-bm25(history_fts) AS rank FROM history_fts JOIN history h ON h.id = history_fts.rowid "
            "WHERE history_fts MATCH ? AND h.user_id = ? ORDER BY rank DESC, h.ts DESC LIMIT ?",
            (self._match(terms, " OR "), user, limit),
        )
        return [_hit(r) for r in rows]

    async def runs_matching(self, text: str, *, limit: int = 1000) -> list[str]:
        terms = search_terms(text)
        if not terms:
            return []
        rows = await self.db.fetchall(
            "SELECT DISTINCT h.run_id FROM history_fts JOIN history h ON h.id = history_fts.rowid "
            "WHERE history_fts MATCH ? LIMIT ?",
            (self._match(terms, " AND "), limit),
        )
        return [str(r[0]) for r in rows]

    async def forget(self, user: str, *, platform: str | None = None) -> int:
        if platform:  # the platform's conversations: TYPE:KEY ids from "platform:" up to "platform;"
            rows = await self.db.fetchall(
                "DELETE FROM history WHERE user_id = ? AND context >= ? AND context < ? RETURNING id",
                (user, f"{platform}:", f"{platform};"),
            )
        else:
            rows = await self.db.fetchall("DELETE FROM history WHERE user_id = ? RETURNING id", (user,))
        if rows:
            await self._purge_index()
        return len(rows)

    async def _purge_index(self) -> None:
        """FTS5 keeps a deleted message's words in its segments until they are merged: merged
        now, so nothing of a forgotten person stays in the index's pages."""
        await self.db.write_apart("INSERT INTO history_fts (history_fts) VALUES ('optimize')")


class PostgresHistoryStore(SqlHistoryStore, store="history"):
    """PostgreSQL: a tsvector (the ``simple`` configuration: every language alike) and a GIN index."""

    async def _purge_index(self) -> None:
        pass  # the tsvector is a column of the row: it went with it

    @staticmethod
    def _query(terms: list[str], joiner: str) -> str:
        return joiner.join(f"'{t}'" for t in terms)  # a quoted lexeme each: no word is an operator

    async def search(self, user: str, text: str, *, limit: int = 10) -> list[HistoryHit]:
        terms = search_terms(text)
        if not terms:
            return []
        rows = await self.db.fetchall(
            "SELECT run_id, context, role, ts, "
            "ts_headline('simple', text, q, 'StartSel=[, StopSel=], MaxWords=24, MinWords=6'), "
            "ts_rank(doc, q) AS rank FROM history, to_tsquery('simple', ?) q "
            "WHERE doc @@ q AND user_id = ? ORDER BY rank DESC, ts DESC LIMIT ?",
            (self._query(terms, " | "), user, limit),
        )
        return [_hit(r) for r in rows]

    async def runs_matching(self, text: str, *, limit: int = 1000) -> list[str]:
        terms = search_terms(text)
        if not terms:
            return []
        rows = await self.db.fetchall(
            "SELECT DISTINCT run_id FROM history WHERE doc @@ to_tsquery('simple', ?) LIMIT ?",
            (self._query(terms, " & "), limit),
        )
        return [str(r[0]) for r in rows]

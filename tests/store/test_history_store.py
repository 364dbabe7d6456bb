"""``HistoryStore``: full-text search over one person's messages and the bot's answers to them,
ranked, with snippets; never another person's; forgetting a person removes them from the
index; and search text with FTS operators, quotes, ``%`` and ``_`` is searched as text, never
as syntax (hypothesis). On memory, SQLite (FTS5) and PostgreSQL (tsvector, GIN)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings

from hub.store import HistoryEntry, HistoryStore, InMemoryHistoryStore, search_terms
from hub.store.sql import PostgresHistoryStore, SqlHistoryStore
from tests._support.backends import BACKENDS, STORE_SETTINGS, hostile_search_text, on_own_loop, sql_database

T0 = 1_772_434_800.0


@asynccontextmanager
async def history(backend: str, tmp_path: Path) -> AsyncIterator[HistoryStore]:
    if backend == "memory":
        yield InMemoryHistoryStore()
        return
    async with sql_database(backend, tmp_path) as db:
        yield PostgresHistoryStore(db) if backend == "postgres" else SqlHistoryStore(db)


def _e(run: str, user: str, role: str, text: str, ts: float = T0, context: str = "test:chat:group") -> HistoryEntry:
    return HistoryEntry(run, context, user, role, text, ts)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_person_finds_their_own_messages_and_the_answers_to_them_only(backend: str, tmp_path: Path) -> None:
    async with history(backend, tmp_path) as store:
        await store.add(
            [
                _e("r1", "ann", "user", "My flight to Lisbon leaves on the 12th from gate B", T0),
                _e("r1", "ann", "bot", "Noted: your flight to Lisbon, the 12th.", T0 + 1),
                _e("r2", "bob", "user", "My flight to Oslo is on Friday", T0 + 2),  # same group, another person
                _e("r2", "bob", "bot", "Your flight to Oslo, Friday.", T0 + 3),
                _e("r3", "ann", "user", "I like trains", T0 + 4, context="test:chat:ann"),
            ]
        )
        hits = await store.search("ann", "flight")
        assert {(h.run_id, h.role) for h in hits} == {("r1", "user"), ("r1", "bot")}
        assert all(h.context == "test:chat:group" and "[flight]" in h.snippet.lower() for h in hits)
        assert await store.search("ann", "Oslo") == []  # bob's: never across people
        ranked = await store.search("ann", "flight Lisbon gate")
        assert ranked[0].role == "user" and ranked[0].rank > ranked[1].rank  # more of the words: first
        assert [h.run_id for h in await store.search("ann", "trains")] == ["r3"]
        assert sorted(await store.runs_matching("flight")) == ["r1", "r2"]
        assert await store.runs_matching("flight Oslo") == ["r2"]  # every word, for the dashboard

        assert await store.forget("ann") == 3
        assert await store.search("ann", "flight") == []
        assert await store.runs_matching("Lisbon") == []
        assert [h.run_id for h in await store.search("bob", "flight")] == ["r2", "r2"]


hostile = hostile_search_text("flight", max_size=40)
_ids = itertools.count()


@pytest.mark.parametrize("backend", BACKENDS)
def test_search_text_is_text_never_syntax(backend: str, tmp_path: Path) -> None:
    with on_own_loop(history(backend, tmp_path)) as (loop, store):

        @settings(STORE_SETTINGS, max_examples=60)
        @given(text=hostile)
        def check(text: str) -> None:
            user = f"u{next(_ids)}"
            other = f"{user}-other"
            stored = f"said {text} here"
            loop.run_until_complete(
                store.add([_e("r", user, "user", stored), _e("x", other, "user", "said % _ * everything")])
            )
            hits = loop.run_until_complete(store.search(user, text))  # never an error
            terms = search_terms(text)
            assert all(h.run_id == "r" for h in hits)  # never the other person's
            if terms and text.isascii():  # (beyond ASCII the tokenizers may cut words elsewhere than Python)
                assert len(hits) == 1  # its own message holds every word of the text
            elif not terms:
                assert hits == []  # no word: nothing, not everything ("%", "_", "*" match no row)
            loop.run_until_complete(store.runs_matching(text))

        check()

"""The dashboard's search (``RunStore.search``, ``conversations(text=)``) goes through a
full-text index of each run's who and what (FTS5 kept by triggers on SQLite, a generated
tsvector with a GIN index on PostgreSQL), not a scan of every row; a run's reply, changed
as it goes, is searchable by its new words only; and search text with FTS operators,
quotes, ``%`` and ``_`` is searched as text, never as syntax (hypothesis)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings

from hub.store import RunRecord, RunStore, search_terms
from hub.store.sql import PostgresRunStore, SqlRunStore
from tests._support.backends import SQL_BACKENDS, STORE_SETTINGS, hostile_search_text, on_own_loop, sql_database


def _store(kind: str, db: object) -> RunStore:
    return SqlRunStore(db) if kind == "sqlite" else PostgresRunStore(db)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", SQL_BACKENDS)
async def test_a_changed_reply_is_found_by_its_new_words_and_a_pruned_run_by_none(kind: str, tmp_path: Path) -> None:
    async with sql_database(kind, tmp_path) as db:
        store = _store(kind, db)
        run = RunRecord(context="telegram:chat:5", started=1.0, user="5", message="what about the weather")
        await store.create(run)
        run.reply = "sunny in Lisbon"
        store.update(run)
        await store.sync()
        assert [r.id for r in await store.search("lisbon")] == [run.id]
        run.reply = "rain in Porto"
        store.update(run)
        await store.sync()
        assert await store.search("lisbon") == []
        assert [r.id for r in await store.search("porto weather")] == [run.id]
        assert [r.id for r, _ in await store.conversations(text="Porto")] == [run.id]
        await db.write("DELETE FROM runs WHERE id = ?", (run.id,))
        assert await store.search("porto") == []


async def test_sqlite_searches_through_the_index_not_every_row(tmp_path: Path) -> None:
    async with sql_database("sqlite", tmp_path) as db:
        plan = await db.fetchall(
            "EXPLAIN QUERY PLAN SELECT id FROM runs WHERE rowid IN (SELECT rowid FROM runs_fts WHERE runs_fts MATCH ?)",
            ('"x"*',),
        )
        steps = " | ".join(str(r[-1]) for r in plan)
        assert "VIRTUAL TABLE INDEX" in steps and "SCAN runs" not in steps.replace("SCAN runs_fts", ""), steps


hostile = hostile_search_text("rain", max_size=30)
_seq = itertools.count()


@pytest.mark.parametrize("kind", SQL_BACKENDS)
def test_search_text_is_text_never_syntax(kind: str, tmp_path: Path) -> None:
    with on_own_loop(sql_database(kind, tmp_path)) as (loop, db):
        store = _store(kind, db)

        @settings(STORE_SETTINGS, max_examples=60)
        @given(text=hostile)
        def check(text: str) -> None:
            n = next(_seq)
            run = RunRecord(context=f"test:chat:{n}", started=float(n), message=f"said {text} here")
            loop.run_until_complete(store.create(run))
            found = loop.run_until_complete(store.search(text, context=run.context))  # never an error
            loop.run_until_complete(store.conversations(text=text))
            if search_terms(text) and text.isascii():
                assert [r.id for r in found] == [run.id]
            elif text and not search_terms(text):
                assert found == []  # no word: nothing, not everything ("" is no search at all)

        check()

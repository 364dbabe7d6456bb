"""The dashboard's search (``RunStore.search``, ``conversations(text=)``) goes through a
full-text index of each run's who and what (FTS5 kept by triggers on SQLite, a generated
tsvector with a GIN index on PostgreSQL), not a scan of every row; a run's reply, changed
as it goes, is searchable by its new words only; and search text with FTS operators,
quotes, ``%`` and ``_`` is searched as text, never as syntax (hypothesis)."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from hub.store import RunRecord, RunState, RunStore, search_terms
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


# --- the index holds ended runs; runs under way are matched at search time (migration 181) --

_WORDS = ["lisbon", "porto", "rain", "sunny", "weather", "ana", "bruno"]


def _words_of(run: RunRecord) -> set[str]:
    text = " ".join(x or "" for x in (run.context, run.user, run.user_name, run.user_handle, run.message, run.reply))
    return set(search_terms(text))


@pytest.mark.parametrize("kind", SQL_BACKENDS)
def test_search_finds_runs_under_way_and_ended_alike_whatever_the_order(kind: str, tmp_path: Path) -> None:
    """Invariant: a search finds exactly the runs holding its words, whether they are under
    way or ended, through every change of state and reply; on SQLite ``runs_fts`` holds
    exactly the ended runs, with their current words (rule-based interleavings)."""
    with on_own_loop(sql_database(kind, tmp_path)) as (loop, db):
        store = _store(kind, db)

        class Runs(RuleBasedStateMachine):
            def __init__(self) -> None:
                super().__init__()
                loop.run_until_complete(db.write("DELETE FROM runs"))
                self.runs: dict[str, RunRecord] = {}

            @rule(words=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3), ended=st.booleans())
            def start(self, words: list[str], ended: bool) -> None:
                n = next(_seq)
                run = RunRecord(context=f"test:chat:{n}", started=float(n), message=" ".join(words))
                if ended:  # a run recorded already ended (a command's, one that ended before its row)
                    run.state, run.ended = RunState.COMPLETED, float(n)
                loop.run_until_complete(store.create(run))
                self.runs[run.id] = run

            @precondition(lambda self: self.runs)
            @rule(data=st.data(), words=st.lists(st.sampled_from(_WORDS), max_size=3))
            def progress(self, data: st.DataObject, words: list[str]) -> None:
                run = self.runs[data.draw(st.sampled_from(sorted(self.runs)))]
                run.reply = " ".join(words)
                store.update(run)
                loop.run_until_complete(store.sync())

            @precondition(lambda self: self.runs)
            @rule(data=st.data(), state=st.sampled_from([RunState.COMPLETED, RunState.FAILED, RunState.RUNNING]))
            def finish(self, data: st.DataObject, state: RunState) -> None:
                run = self.runs[data.draw(st.sampled_from(sorted(self.runs)))]
                run.state, run.ended = state, time.time()
                loop.run_until_complete(store.finish(run))

            @precondition(lambda self: self.runs)
            @rule(data=st.data())
            def delete(self, data: st.DataObject) -> None:
                run_id = data.draw(st.sampled_from(sorted(self.runs)))
                loop.run_until_complete(db.write("DELETE FROM runs WHERE id = ?", (run_id,)))
                del self.runs[run_id]

            @rule(word=st.sampled_from(_WORDS))
            def search(self, word: str) -> None:
                found = {r.id for r in loop.run_until_complete(store.search(word, limit=1000))}
                assert found == {i for i, r in self.runs.items() if word in _words_of(r)}

            @invariant()
            def index_holds_the_ended_runs(self) -> None:
                if kind != "sqlite":
                    return
                for word in _WORDS:
                    rows = loop.run_until_complete(
                        db.fetchall(
                            "SELECT r.id FROM runs_fts JOIN runs r ON r.rowid = runs_fts.rowid WHERE runs_fts MATCH ?",
                            (f'"{word}"',),
                        )
                    )
                    ended = {i for i, r in self.runs.items() if r.state != RunState.RUNNING and word in _words_of(r)}
                    assert {row[0] for row in rows} == ended, word

        run_state_machine_as_test(Runs, settings=settings(STORE_SETTINGS, max_examples=25, stateful_step_count=20))


async def test_a_database_from_before_181_keeps_its_runs_under_way_out_of_the_index(tmp_path: Path) -> None:
    """Migration 181 on a database whose old triggers indexed runs under way: those are taken
    out (with the words the index held), ended ones stay, and both are still found."""
    async with sql_database("sqlite", tmp_path) as db:
        store = SqlRunStore(db)  # type: ignore[arg-type]
        live = RunRecord(context="test:chat:1", started=1.0, message="rain in porto")
        done = RunRecord(context="test:chat:2", started=2.0, message="sunny in lisbon")
        done.state, done.ended = RunState.COMPLETED, 3.0
        for run in (live, done):
            await store.create(run)
        # back to version 152: its triggers, which indexed every run, and the index rebuilt so
        from hub.store.sql._migrations import _sqlite_runs_fts, _sqlite_runs_fts_at_end

        for name in ("runs_fts_added", "runs_fts_deleted", "runs_fts_changed"):
            await db.write(f"DROP TRIGGER {name}")
        await db.write("INSERT INTO runs_fts (runs_fts) VALUES ('delete-all')")
        await db.conn.execute("BEGIN IMMEDIATE")
        await _sqlite_runs_fts(db.conn)
        assert await db.fetchall("SELECT rowid FROM runs_fts WHERE runs_fts MATCH 'porto'")  # the old way
        await _sqlite_runs_fts_at_end(db.conn)
        await db.conn.execute("COMMIT")
        assert await db.fetchall("SELECT rowid FROM runs_fts WHERE runs_fts MATCH 'porto'") == []
        assert len(await db.fetchall("SELECT rowid FROM runs_fts WHERE runs_fts MATCH 'lisbon'")) == 1
        assert [r.id for r in await store.search("porto")] == [live.id]
        assert [r.id for r in await store.search("lisbon")] == [done.id]
        live.state, live.ended = RunState.COMPLETED, 4.0
        await store.finish(live)
        assert len(await db.fetchall("SELECT rowid FROM runs_fts WHERE runs_fts MATCH 'porto'")) == 1
        assert [r.id for r in await store.search("porto")] == [live.id]

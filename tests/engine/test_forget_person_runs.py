"""``hub memory forget --person`` erases the person from the run records, on SQLite and
PostgreSQL: the runs each of their identities started (and the child runs under them), their
inputs in other people's runs, their inputs in the inbox, so that ``hub runs``, ``hub trace``,
the dashboard's search and the full-text index have nothing of theirs; nobody else's goes.
A forget cut off part-way is finished at the hub's next start (and by the next forget; its
episodes part is tested with Chroma in tests/memory/test_forget_person_episodes.py)."""

from __future__ import annotations

import json
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from hub.cli._memory import forget_person
from hub.errors import HubError, StoreError
from hub.logs import InputLog
from hub.store import (
    FORGOTTEN,
    Approval,
    ApprovalState,
    People,
    Reminder,
    RunRecord,
    RunState,
    open_stores,
)
from hub.testing.postgres import temporary_schema
from tests._support.processes import hub_cmd

ANN, BOB, CARL, TELE = "zebraquartz", "bluefinch", "moonstone", "tealeaf"  # one word each, found by search


async def _ended(runs: Any, record: RunRecord, *entries: InputLog) -> RunRecord:
    await runs.create(record)
    for entry in entries:
        runs.append(record, entry)
    record.state, record.ended = RunState.COMPLETED, record.started + 1
    await runs.finish(record)
    return record


async def _talk(rig: Any) -> dict[str, str]:
    """ann and bob (one person), carl, and a Telegram user whose id is also "bob"; the run ids."""
    people = People(rig.hub.memory)
    await people.redeem(await people.new_code("cli", "ann"), "cli", "bob")
    ann = await rig.say(f"hello {ANN}", user="ann")
    bob = await rig.say(f"hi {BOB}", user="bob")
    carl = await rig.say(f"this is {CARL}", user="carl")
    runs = rig.hub.runs
    # a group run of carl's that took a message of bob's on its way, and a child run of ann's
    shared = await _ended(
        runs,
        RunRecord(context="cli:room", user="carl", message="carl opens"),
        InputLog(type="cli:session", content="carl opens", user="carl"),
        InputLog(type="cli:session", content="a NUL \x00 (PostgreSQL cannot read it out of JSON)", user="carl"),
        InputLog(type="cli:session", content=f"bob adds {BOB}", user="bob", meta={"user_name": "Bob"}),
    )
    child = await _ended(
        runs,
        RunRecord(context="cli:helper", parent_id=ann.run_id, message=f"look up {ANN}"),
        InputLog(type="child", content=f"look up {ANN}"),
    )
    tele = await _ended(runs, RunRecord(context="telegram:chat:5", user="bob", message=f"telegram {TELE}"))
    # reminders bob set, here and (someone else) on Telegram
    for rid, context, word in (("rem-cli", "cli:session:bob", BOB), ("rem-tg", "telegram:chat:5", TELE)):
        reminder = Reminder(rid, context, "bob", f"water the plants {word}", time.time() + 3600)
        assert await rig.hub.stores.reminders.add(reminder, cap=0)
    # a question bob's run asked before an action (its arguments from his message), and carl's
    for who, run_id, word in (("bob", bob.run_id, BOB), ("carl", carl.run_id, CARL)):
        now = time.time()
        await rig.hub.stores.approvals.ask(
            Approval(
                f"q-{who}",
                f"k-{who}",
                run_id,
                f"cli:session:{who}",
                "pay",
                {"note": word},
                ApprovalState.DENIED,
                now,
                now + 600,
                platform="cli",
                user=who,
            )
        )
    # a message of bob's still waiting in the inbox (the hub stopped before answering it)
    await rig.hub.inbox.record("cli:session:bob", InputLog(type="cli:session", content=f"later {BOB}", user="bob"))
    return {
        "ann": ann.run_id,
        "bob": bob.run_id,
        "carl": carl.run_id,
        "shared": shared.id,
        "child": child.id,
        "tele": tele.id,
    }


async def _fts_hits(rig: Any, word: str) -> int:
    db = rig.hub.stores.db
    if db.dialect == "sqlite":
        row = await db.fetchone("SELECT COUNT(*) FROM runs_fts WHERE runs_fts MATCH ?", (word,))
    else:
        row = await db.fetchone("SELECT COUNT(*) FROM runs WHERE search @@ to_tsquery('simple', ?)", (word,))
    return int(row[0])


async def _index_pages_hold(rig: Any, word: str) -> bool:
    """Whether SQLite's FTS5 segments still hold ``word`` (a delete only marks it deleted)."""
    db = rig.hub.stores.db
    if db.dialect != "sqlite":
        return False
    blocks = await db.fetchall("SELECT block FROM runs_fts_data UNION ALL SELECT block FROM history_fts_data")
    return any(word.encode() in bytes(b or b"") for (b,) in blocks)


def _write_config(tmp_path: Path, config: Any) -> None:
    store = f"[store]\nurl = {json.dumps(config.store.url)}\n" if config.store.url else ""
    (tmp_path / "config.toml").write_text(f"[hub]\ndata_dir = {json.dumps(str(config.data_dir))}\n{store}")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_forget_person_erases_their_runs_and_nobody_elses(make_rig, config, tmp_path: Path, backend) -> None:
    async with AsyncExitStack() as stack:
        if backend == "postgres":
            config.store.url = await stack.enter_async_context(temporary_schema())
        _write_config(tmp_path, config)
        async with make_rig().hub as hub:
            ids = await _talk(_Rig(hub))
            assert await _fts_hits(_Rig(hub), ANN) == 2 and await _fts_hits(_Rig(hub), BOB) == 1
        rc, out, err = await hub_cmd("memory", "forget", "--person", "cli:bob", cwd=tmp_path)
        # runs: ann's, bob's and the child of ann's; inbox: their two handled inputs and bob's
        # waiting one; messages: their two and the answers to them
        assert rc == 0 and out == (
            "forgot person cli:bob (cli:ann, cli:bob): 0 episodes, 3 runs, 1 input in others' runs, "
            "3 inbox inputs, 4 indexed messages, 1 reminder, 1 approval question\n"
        ), err
        async with open_stores(config) as stores:  # what the hub's next start would find
            assert stores.db is not None
            inbox = [d for (d,) in await stores.db.fetchall("SELECT data FROM inbox ORDER BY received")]
            events = " ".join(d for (d,) in await stores.db.fetchall("SELECT data FROM run_events"))
        assert len(inbox) == 3 and CARL in inbox[2] and inbox[:2] == ["{}", "{}"]  # theirs handled: stripped
        assert ANN not in events and BOB not in events and CARL in events
        if backend == "sqlite":  # not even in the file's free space, or in the WAL's old pages
            files = [config.data_dir / name for name in ("hub.db", "hub.db-wal")]
            raw = b"".join(f.read_bytes() for f in files if f.exists())
            assert ANN.encode() not in raw and BOB.encode() not in raw and CARL.encode() in raw

        rc, out, err = await hub_cmd("runs", "--json", "--limit", "100", cwd=tmp_path)
        assert rc == 0, err
        listed = {(row["id"], row["user"]) for row in map(json.loads, out.splitlines())}
        assert listed == {(ids["carl"], "carl"), (ids["shared"], "carl"), (ids["tele"], "bob")}
        for gone in ("ann", "bob", "child"):
            rc, out, err = await hub_cmd("trace", ids[gone], cwd=tmp_path)
            assert rc != 0 and ANN not in out + err and BOB not in out + err
        rc, out, err = await hub_cmd("trace", ids["shared"], cwd=tmp_path)
        assert rc == 0 and "carl opens" in out and FORGOTTEN in out, err
        assert BOB not in out and "Bob" not in out

        async with make_rig().hub as hub:
            rig = _Rig(hub)
            for word in (ANN, BOB):  # the dashboard's search (runs and conversations) and the index
                assert await hub.runs.search(word) == [] and await hub.runs.conversations(text=word) == []
                assert await _fts_hits(rig, word) == 0 and not await _index_pages_hold(rig, word)
            assert [r.id for r in await hub.runs.search(CARL)] == [ids["carl"]]
            assert [r.id for r in await hub.runs.search(TELE)] == [ids["tele"]]  # telegram's "bob" is another
            assert await hub.inbox.pending() == []
            assert [r.id for r in await hub.stores.reminders.waiting(user="bob")] == ["rem-tg"]
            assert [q.id for q in await hub.stores.approvals.list()] == ["q-carl"]
            shared = await hub.runs.events(ids["shared"])
            said = [(e.content, e.user) for e in shared if isinstance(e, InputLog)]
            assert said[0] == ("carl opens", "carl") and said[2] == (FORGOTTEN, None) and len(said) == 3
            assert await People(hub.memory).forgetting() == {}  # the journal entry went with the last part


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_forget_cut_off_is_finished_at_the_next_start(
    make_rig, config, backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hub.store.sql import SqlHistoryStore

    async with AsyncExitStack() as stack:
        if backend == "postgres":
            config.store.url = await stack.enter_async_context(temporary_schema())
        async with make_rig().hub as hub:
            ids = await _talk(_Rig(hub))

        # the database fails half-way: after the runs of cli:ann went, before their messages
        # left the search index and before any link or memory did
        real = SqlHistoryStore.forget

        async def fails(self: Any, user: str, *, platform: str | None = None) -> int:
            raise StoreError("the disk went away", store="history", operation="write")

        monkeypatch.setattr(SqlHistoryStore, "forget", fails)
        with pytest.raises(StoreError, match="the disk went away"):
            await forget_person(config, "cli:ann")
        monkeypatch.setattr(SqlHistoryStore, "forget", real)

        async with make_rig().hub as hub:  # the start finishes it, before any input is taken
            assert await hub.runs.get(ids["ann"]) is None and await hub.runs.get(ids["bob"]) is None
            assert await hub.runs.search(BOB) == [] and await hub.stores.history.search("bob", BOB) == []
            assert await hub.runs.get(ids["carl"]) is not None
            people = People(hub.memory)
            assert await people.lookup("cli", "bob") is None and await people.lookup("cli", "ann") is None
            # with no episode store there was no episode to wait for: the journal entry is gone too
            assert await people.forgetting() == {}
        with pytest.raises(HubError, match="no person 'cli:bob'"):
            await forget_person(config, "cli:bob")


class _Rig:
    def __init__(self, hub: Any) -> None:
        self.hub = hub

    async def say(self, text: str, *, user: str) -> Any:
        return await self.hub.send("cli:session", {"user": user}, text, user=user)

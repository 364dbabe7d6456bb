"""An answered run's end: its memory and its inputs marked done are written together, in one
SQLite commit (a commit less a turn), and an unanswered run's inputs are still kept when its
memory could not be saved."""

from __future__ import annotations

from typing import Any

import pytest

from hub.store.sql import Database

REPLY = '<response><output type="cli:message">hi</output></response>'


async def test_an_answered_runs_memory_and_inputs_done_share_one_commit(make_hub, out, monkeypatch) -> None:
    hub = make_hub([REPLY, REPLY])
    async with hub:
        db = hub.stores.db
        assert isinstance(db, Database)
        batches: list[list[str]] = []
        commit = db._commit

        async def recording(batch: list[Any]) -> list[BaseException | None]:
            batches.append([" ".join(sql.split()) for sql, _, _ in batch])
            return await commit(batch)

        monkeypatch.setattr(db, "_commit", recording)
        for text in ("one", "two"):
            result = await hub.send("cli:session", {"user": "ann"}, text, user="ann")
            assert result is not None and result.ok
        monkeypatch.undo()
    assert out.getvalue().count("hi") == 2
    done = [b for b in batches if any(s.startswith("UPDATE inbox SET state = 'done'") for s in b)]
    assert len(done) == 2, batches
    for batch in done:  # the working memory and the context row, in the same transaction
        assert any(s.startswith("INSERT INTO kv") for s in batch), batch


@pytest.mark.parametrize("answered", [True, False])
async def test_inputs_are_done_after_a_failed_memory_save_only_when_the_run_answered(
    make_hub, out, monkeypatch, answered: bool
) -> None:
    from hub.errors import StoreError

    hub = make_hub([REPLY if answered else "<response><reasoning>nothing to say</reasoning></response>"])
    async with hub:

        async def failing(*args: Any, **kw: Any) -> bool:
            raise StoreError("kv: disk full", store="kv", operation="write")

        monkeypatch.setattr(hub.memory, "set_if_current", failing)
        result = await hub.send("cli:session", {"user": "ann"}, "hello", user="ann")
        assert result is not None and not result.ok  # the memory was not saved: the run says so
        monkeypatch.undo()
        pending = await hub.inbox.pending()
    # answered: the user has the reply, the input is done; not answered: it waits in the inbox
    assert (len(pending) == 0) is answered

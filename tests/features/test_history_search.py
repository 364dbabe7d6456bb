"""search_history: the model searches the past messages of the person it talks to, in every
conversation of theirs, and in a group only the asker's own messages and the answers to them;
the dashboard's search reads the same index; ``hub memory forget --user`` takes a person out
of it. On SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hub import Hub, HubConfig, ScriptedModel
from hub.cli._memory import forget
from hub.models import ModelRequest
from hub.testing.postgres import temporary_schema
from tests._support.chat import Said, reply_to_input, test_extension

GROUP = "test:chat:group"


def _config(tmp_path: Path, url: str) -> HubConfig:
    cfg = HubConfig()
    cfg.hub.data_dir = str(tmp_path)
    cfg.hub.contexts_dir = str(tmp_path)
    cfg.hub.shutdown_grace = 0.0
    cfg.store.url = url
    cfg.memory.episodes = False
    cfg.agent.history_search = True
    return cfg


@contextlib.asynccontextmanager
async def _backend(kind: str) -> AsyncIterator[str]:
    if kind == "postgres":
        async with temporary_schema() as url:
            yield url
    else:
        yield ""


class Searcher:
    """Echoes every message; asked "search: WORDS", it calls search_history and keeps the result."""

    def __init__(self) -> None:
        self.results: list[Any] = []

    def __call__(self, request: ModelRequest) -> str:
        last = request.messages[-1]["content"]
        if "<action_result" in last:
            body = last[last.rindex("<action_result") :]
            self.results.append(json.loads(body[body.index(">") + 1 : body.index("</action_result>")]))
            return "<response><output>found</output></response>"
        if "search: " in last:
            words = last[last.rindex("search: ") + 8 : last.index("</input>", last.rindex("search: "))]
            return (
                f'<response><action_call name="search_history">{json.dumps({"query": words})}</action_call></response>'
            )
        return reply_to_input(request)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_the_model_finds_the_askers_own_messages_never_another_persons(
    tmp_path: Path, said: Said, backend: str
) -> None:
    async with _backend(backend) as url:
        model = Searcher()
        cfg = _config(tmp_path, url)
        hub = Hub(cfg, model=ScriptedModel(model), load_extensions=False, extensions=[test_extension(said)])
        async with hub:
            await hub.send(GROUP, data="my flight to Lisbon is on the 12th", user="ann")
            await hub.send(GROUP, data="my flight to Oslo is on Friday", user="bob")
            await hub.send("test:chat:ann", data="the hotel in Lisbon is booked", user="ann")
            await hub.send(GROUP, data="search: flight Lisbon", user="ann")
            [result] = model.results
            found = result["matches"]
            texts = " ".join(m["snippet"] for m in found)
            assert "Oslo" not in texts and "Friday" not in texts  # bob's, and the answer to bob
            assert {m["from"] for m in found} == {"the person", "you"}  # ann's and the echo to ann
            assert {m["conversation"] for m in found} == {GROUP, "test:chat:ann"}
            assert all(m["date"].endswith("UTC") for m in found)

            # the dashboard's search reads the same index
            assert hub.history is not None
            flights = await hub.history.store.runs_matching("flight")
            runs = {r.id: r.user for r in await hub.runs.list(limit=100)}
            assert sorted(runs[i] for i in flights) == ["ann", "ann", "bob"]  # the search itself too

        deleted, notes = await forget(cfg, user="ann")
        assert any("indexed messages" in n for n in notes)
        async with Hub(
            cfg, model=ScriptedModel(model), load_extensions=False, extensions=[test_extension(said)]
        ) as hub:
            assert hub.history is not None
            assert await hub.history.store.search("ann", "Lisbon") == []
            assert [h.context for h in await hub.history.store.search("bob", "Oslo")] == [GROUP, GROUP]


async def test_without_the_key_the_model_has_no_search_history(tmp_path: Path, said: Said) -> None:
    cfg = _config(tmp_path, "")
    cfg.agent.history_search = False
    hub = Hub(cfg, model=ScriptedModel(reply_to_input), load_extensions=False, extensions=[test_extension(said)])
    assert "search_history" not in hub.actions


async def test_what_the_index_keeps_is_redacted_as_the_run_log_is(tmp_path: Path, said: Said) -> None:
    secret = "sk-live-history-0123456789abcdef"
    cfg = _config(tmp_path, "")
    cfg.model.api_key = secret
    hub = Hub(cfg, model=ScriptedModel(reply_to_input), load_extensions=False, extensions=[test_extension(said)])
    async with hub:
        await hub.send("test:chat:ann", data=f"my key is {secret}", user="ann")
        assert hub.history is not None
        hits = await hub.history.store.search("ann", "key")
        assert len(hits) == 2 and all(secret not in h.snippet and "REDACTED" in h.snippet for h in hits)
        assert await hub.history.store.search("ann", secret) == []

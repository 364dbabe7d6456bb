"""Episodic memory end to end: episodes written after runs, recalled into the next prompt,
kept across restarts, pruned, forgotten and exported; a broken store leaves the hub running.

The hub runs with the scripted model and the terminal extension; the store is Chroma
under ``data/chroma`` unless a test injects another, always with the shared MiniLM.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import hub_cli
from hub import Extension, Hub, HubConfig, ScriptedModel, action
from hub.cli import main as cli_main
from hub.definitions import RunResult
from hub.logs import ActionCallLog, ActionResultLog, InputLog, OutputLog, StateLog, ThoughtLog
from hub.memory import (
    IDS_COMPLETE,
    INDEX,
    Episode,
    HashEmbedder,
    InMemoryVectorStore,
    MiniLMEmbedder,
    VectorStore,
    episode_from_run,
)
from hub.store import RunState
from hub_cli import CliSettings

CTX = "cli:session"
ANN = {"user": "ann"}
WEATHER_Q = "What's the weather in NYC?"
WEATHER_A = "It is 72°F and sunny in NYC."
WEATHER_REPLY = (
    "<response><reasoning>The user wants the weather; call the action.</reasoning>"
    '<action_call name="getWeather">{"location": "New York City"}</action_call></response>'
)
ANSWER_REPLY = f"<response><output>{WEATHER_A}</output></response>"
OK_REPLY = "<response><output>Sure.</output></response>"


class Where(BaseModel):
    location: str


@action(name="getWeather", description="Current weather of a city.")
async def get_weather(args: Where, ctx: Any) -> dict[str, Any]:
    return {"temp_f": 72, "sky": "sunny"}


TOOLS = Extension(name="weather", actions=[get_weather])


def make_hub(
    tmp_path: Path,
    model: ScriptedModel,
    embedder: MiniLMEmbedder,
    *,
    store: VectorStore | None = None,
    **memory: Any,
) -> Hub:
    cfg = HubConfig()
    cfg.hub.data_dir = str(tmp_path)
    cfg.hub.contexts_dir = str(tmp_path)
    cfg.agent.max_history = 0  # recall is then the only memory of earlier runs
    for k, v in memory.items():
        setattr(cfg.memory, k, v)
    cli = hub_cli.extension(CliSettings(stdin=False), out=io.StringIO())
    hub = Hub(cfg, model=model, load_extensions=False, extensions=[cli, TOOLS])
    if hub.episodes is not None:
        hub.episodes.embedder = embedder
        hub.episodes.store = store
    return hub


async def ask(hub: Hub, text: str, args: dict[str, str] = ANN) -> RunResult:
    result = await hub.send(CTX, args, text, user=args["user"])
    assert result is not None
    assert hub.episodes is not None
    await hub.episodes.flush()
    return result


def prompt_of(model: ScriptedModel) -> str:
    """The last run's prompt (not an episode summary's)."""
    runs = [r for r in model.requests if r.metadata.get("purpose") != "episode-summary"]
    return runs[-1].messages[0]["content"]


async def test_a_past_exchange_is_recalled_for_a_related_question_only(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    model = ScriptedModel([WEATHER_REPLY, ANSWER_REPLY, OK_REPLY, OK_REPLY])
    async with make_hub(tmp_path, model, minilm) as hub:
        first = await ask(hub, WEATHER_Q)
        assert first.ok and first.text == WEATHER_A
        assert "<episodes>" not in prompt_of(model)  # nothing to recall yet

        await ask(hub, "What's the forecast for New York?")
        prompt = prompt_of(model)
        assert "<episodes>" in prompt
        assert f"User ann asked: {WEATHER_Q}" in prompt
        assert 'getWeather({"location": "New York City"})' in prompt
        assert WEATHER_A in prompt

        await ask(hub, "How do I reset my router password?")
        assert "<episodes>" not in prompt_of(model)


async def test_recall_survives_a_restart_and_forget_removes_it(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    model = ScriptedModel([WEATHER_REPLY, ANSWER_REPLY])
    async with make_hub(tmp_path, model, minilm) as hub:
        await ask(hub, WEATHER_Q)

    model = ScriptedModel([OK_REPLY, OK_REPLY, OK_REPLY])
    async with make_hub(tmp_path, model, minilm) as hub:
        assert hub.episodes is not None
        await ask(hub, "forecast for New York")
        assert WEATHER_A in prompt_of(model)
        assert len(await hub.episodes.episodes()) == 2

        assert await hub.episodes.forget(context=CTX + ":ann") == 2
        await ask(hub, "forecast for New York")
        assert "<episodes>" not in prompt_of(model)


async def test_episodes_of_other_conversations_need_global_recall(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    bob = {"user": "bob"}
    model = ScriptedModel([WEATHER_REPLY, ANSWER_REPLY, OK_REPLY])
    async with make_hub(tmp_path / "a", model, minilm) as hub:
        await ask(hub, WEATHER_Q)
        await ask(hub, "forecast for New York", bob)
        assert "<episodes>" not in prompt_of(model)

    model = ScriptedModel([WEATHER_REPLY, ANSWER_REPLY, OK_REPLY])
    async with make_hub(tmp_path / "b", model, minilm, global_recall=True) as hub:
        await ask(hub, WEATHER_Q)
        await ask(hub, "forecast for New York", bob)
        assert WEATHER_A in prompt_of(model)


async def test_episodes_still_in_the_history_are_not_repeated(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    model = ScriptedModel([WEATHER_REPLY, ANSWER_REPLY, OK_REPLY])
    hub = make_hub(tmp_path, model, minilm, store=InMemoryVectorStore(minilm))
    hub.config.agent.max_history = 60
    async with hub:
        await ask(hub, WEATHER_Q)
        await ask(hub, "forecast for New York")
        prompt = prompt_of(model)
        assert "<history>" in prompt and WEATHER_A in prompt
        assert "<episodes>" not in prompt


def test_an_episode_holds_what_came_in_what_the_agent_did_and_how_it_ended() -> None:
    call = ActionCallLog(name="getWeather", args={"location": "New York City"})
    logs = [
        InputLog(type="text", content=WEATHER_Q, user="ann", ts=1.0),
        ThoughtLog(content="The user wants the weather."),
        call,
        ActionResultLog(call_id=call.id, name="getWeather", ok=True, data={"temp_f": 72}),
        OutputLog(type="cli:message", content=WEATHER_A, sent=True),
        OutputLog(type="cli:message", content="lost", sent=False, error="network down"),
        StateLog(state="completed", ts=1_800_000_000.0),
    ]
    result = RunResult("run1", "telegram:chat:42", RunState.COMPLETED, None, logs)
    ep = episode_from_run(result, context_type="telegram:chat")
    assert ep is not None
    assert ep.digest == (
        "User ann asked: What's the weather in NYC? / Agent thought: The user wants the weather. / "
        'Agent called getWeather({"location": "New York City"}) → {"temp_f": 72} / '
        f"Agent answered: {WEATHER_A} / Agent's cli:message failed: network down / Ended: completed"
    )
    assert (ep.prompt, ep.completion, ep.time) == (WEATHER_Q, WEATHER_A, 1_800_000_000.0)
    meta = ep.to_record().metadata
    keys = ("context", "context_type", "platform", "user", "run_id", "state")
    assert {k: meta[k] for k in keys} == {
        "context": "telegram:chat:42",
        "context_type": "telegram:chat",
        "platform": "telegram",
        "user": "ann",
        "run_id": "run1",
        "state": "completed",
    }
    assert Episode.from_record(ep.to_record()) == ep
    assert ep.render().startswith("2027-01-15 08:00 UTC, telegram:chat:42 (completed): User ann")


def test_a_run_with_no_input_text_is_no_episode() -> None:
    logs = [InputLog(type="text", content="  "), StateLog(state="failed", reason="boom")]
    assert episode_from_run(RunResult("r", CTX, RunState.FAILED, "boom", logs)) is None
    assert episode_from_run(RunResult("r", CTX, RunState.FAILED, "boom", [])) is None


def test_a_long_run_keeps_its_ending_within_the_bound() -> None:
    logs: list[Any] = [InputLog(type="text", content="go", user="ann")]
    logs += [ThoughtLog(content="x" * 400) for _ in range(20)]
    logs.append(StateLog(state="killed", reason="max_steps (8)"))
    ep = episode_from_run(RunResult("r", CTX, RunState.KILLED, "max_steps (8)", logs))
    assert ep is not None and len(ep.digest) <= 1500
    assert ep.digest.endswith("Ended: killed (max_steps (8))")


async def test_the_model_summarises_episodes_when_configured(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    script = [WEATHER_REPLY, ANSWER_REPLY, OK_REPLY]

    def reply(request: Any) -> str:
        if request.metadata.get("purpose") == "episode-summary":
            if "getWeather" not in request.messages[0]["content"]:
                raise ValueError("not the weather episode")  # its digest stands
            return "<summary>Ann asked about the weather in New York; it was 72°F.</summary>"
        return script.pop(0)

    model = ScriptedModel(reply)
    store = InMemoryVectorStore(minilm)
    async with make_hub(tmp_path, model, minilm, store=store, summarize=True) as hub:
        await ask(hub, WEATHER_Q)
        await ask(hub, "forecast for New York")
        assert "(completed): Ann asked about the weather in New York; it was 72°F." in prompt_of(model)
        assert hub.episodes is not None
        assert [bool(e.summary) for e in await hub.episodes.episodes()] == [True, False]


async def test_retention_prunes_by_age_then_oldest_beyond_the_count(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    store = InMemoryVectorStore(HashEmbedder())
    now = time.time()
    model = ScriptedModel([])
    hub = make_hub(tmp_path, model, minilm, store=store, retention_days=1, max_episodes=3)
    async with hub:
        memory = hub.episodes
        assert memory is not None
        memory.config.prune_every = 0
        for i, age_h in enumerate([72, 30, 5, 4, 3, 2, 1]):
            when = now - age_h * 3600
            await memory.remember(Episode(f"r{i}", CTX, "ann", when, "completed", f"q{i}", "a", "d"))
        assert await memory.prune(now=now) == 4  # two too old, then the two oldest
        assert [e.run_id for e in await memory.episodes()] == ["r4", "r5", "r6"]


async def test_retention_runs_every_n_episodes(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    store = InMemoryVectorStore(HashEmbedder())
    hub = make_hub(tmp_path, ScriptedModel([]), minilm, store=store, max_episodes=2, prune_every=3)
    async with hub:
        memory = hub.episodes
        assert memory is not None
        for i in range(3):
            when = time.time() + i
            await memory.remember(Episode(f"r{i}", CTX, "", when, "completed", "q", "a", "d"))
        assert memory._pruning is not None
        await memory._pruning
        assert await store.count(INDEX) == 2


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[hub]\ndata_dir = "{tmp_path / "data"}"\ncontexts_dir = "{tmp_path}"\n')
    return path


def test_the_command_line_forgets_and_exports(
    tmp_path: Path, minilm: MiniLMEmbedder, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    config = write_config(tmp_path)

    async def talk() -> None:
        bob_reply = "<response><output>Hi Bob.</output></response>"
        model = ScriptedModel([WEATHER_REPLY, ANSWER_REPLY, bob_reply])
        async with make_hub(tmp_path / "data", model, minilm) as hub:
            await ask(hub, WEATHER_Q)
            await ask(hub, "Hello, I am Bob", {"user": "bob"})
            assert await hub.memory.get("working-memory:cli:session:ann") == []

    asyncio.run(talk())

    def id_keys() -> list[str]:  # the episodes' id keys in the hub's memory store
        with sqlite3.connect(tmp_path / "data" / "hub.db") as db:
            rows = db.execute("SELECT key FROM kv WHERE key LIKE 'episode-ids:%' ORDER BY key").fetchall()
        return [k for (k,) in rows if k != IDS_COMPLETE]

    assert [k.split(":")[1:-1] for k in id_keys()] == [["15", "cli", "session", "ann"], ["15", "cli", "session", "bob"]]
    out = tmp_path / "train.jsonl"
    assert cli_main(["export-training", "--config", str(config), "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert lines == [
        {"prompt": WEATHER_Q, "completion": WEATHER_A},
        {"prompt": "Hello, I am Bob", "completion": "Hi Bob."},
    ]

    assert cli_main(["memory", "forget", "--config", str(config), "--user", "bob"]) == 0
    assert "1 episode" in capsys.readouterr().out
    assert [k.split(":")[4] for k in id_keys()] == ["ann"]
    assert cli_main(["export-training", "--config", str(config), "--out", str(out), "--meta"]) == 0
    (line,) = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert line["meta"]["context"] == "cli:session:ann" and line["meta"]["platform"] == "cli"

    forget_ann = ["memory", "forget", "--config", str(config), "--context", "cli:session:ann"]
    assert cli_main(forget_ann) == 0
    assert "working-memory:cli:session:ann" in capsys.readouterr().out
    assert id_keys() == []
    assert cli_main(["export-training", "--config", str(config), "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == ""
    with pytest.raises(SystemExit):
        cli_main(["memory", "forget", "--config", str(config)])


@pytest.mark.parametrize("damage", ["corrupt", "not-a-directory"])
async def test_a_broken_store_leaves_the_hub_running_with_one_error(
    tmp_path: Path, minilm: MiniLMEmbedder, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    if damage == "corrupt":
        (tmp_path / "chroma").mkdir()
        (tmp_path / "chroma" / "chroma.sqlite3").write_bytes(os.urandom(4096))
    else:  # what a directory without permission also gives (tests run as root here)
        (tmp_path / "chroma").write_text("not a store")
    model = ScriptedModel([OK_REPLY, OK_REPLY])
    with caplog.at_level(logging.WARNING):
        async with make_hub(tmp_path, model, minilm) as hub:
            for text in (WEATHER_Q, "forecast for New York"):
                result = await ask(hub, text)
                assert result.ok and result.text == "Sure."
            assert hub.episodes is not None and not hub.episodes.available
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    message = errors[0].getMessage()
    assert "episodic memory is off" in message and str(tmp_path / "chroma") in message


async def test_episodic_memory_can_be_turned_off(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    hub = make_hub(tmp_path, ScriptedModel([OK_REPLY]), minilm, episodes=False)
    from hub.memory import EpisodicMemory

    assert hub.episodes is None and not any(isinstance(c, EpisodicMemory) for c in hub.components)
    async with hub:
        assert (await hub.send(CTX, ANN, WEATHER_Q, user="ann")).ok  # type: ignore[union-attr]
    assert not (tmp_path / "chroma").exists()


async def test_new_forgets_what_recall_would_bring_back(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    """/new forgets the conversation's episodes too: recall does not bring back what it
    forgot (issue 40, item 2)."""
    from hub import CommandCall

    model = ScriptedModel([WEATHER_REPLY, ANSWER_REPLY], default=OK_REPLY)
    async with make_hub(tmp_path, model, minilm) as hub:
        assert hub.episodes is not None
        await ask(hub, WEATHER_Q)
        assert len(await hub.episodes.episodes(context=CTX + ":ann")) == 1
        new = await hub.send(CTX, ANN, "/new", user="ann", command=CommandCall("new", ""))
        assert new.ok
        assert await hub.episodes.episodes(context=CTX + ":ann") == []
        await ask(hub, "What's the forecast for New York?")
        assert WEATHER_A not in prompt_of(model)

"""The running training export (``[memory] export_training``): each new episode appended to
the JSONL file as ``hub export-training`` writes it, secrets masked, the file rotated by size."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest

import hub_cli
from hub import Hub, HubConfig, ScriptedModel
from hub.cli import main as cli_main
from hub.memory import Embedder, HashEmbedder, MiniLMEmbedder, TrainingExport
from hub_cli import CliSettings

SECRET = "sk-test-0123456789abcdef"


def make_hub(data: Path, model: ScriptedModel, embedder: Embedder | None = None, **memory: Any) -> Hub:
    cfg = HubConfig()
    cfg.hub.data_dir = str(data)
    cfg.hub.contexts_dir = str(data)
    cfg.model.api_key = SECRET
    cfg.memory.export_training = True
    for k, v in memory.items():
        setattr(cfg.memory, k, v)
    cli = hub_cli.extension(CliSettings(stdin=False), out=io.StringIO())
    hub = Hub(cfg, model=model, load_extensions=False, extensions=[cli])
    if hub.episodes is not None:
        hub.episodes.embedder = embedder or HashEmbedder()
    return hub


def export(hub: Hub) -> TrainingExport:
    (component,) = [c for c in hub.components if isinstance(c, TrainingExport)]
    return component


def reply(text: str) -> str:
    return f"<response><output>{text}</output></response>"


def test_each_episode_is_appended_as_export_training_writes_it(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    import asyncio

    data = tmp_path / "data"
    model = ScriptedModel([reply("Hi Ann."), reply(f"The key is {SECRET}, ünïcode"), "<response></response>"])

    async def talk() -> None:
        async with make_hub(data, model, minilm) as hub:
            for user, text in (("ann", "Hello"), ("bob", "What is the key?"), ("cy", "say nothing")):
                result = await hub.send("cli:session", {"user": user}, text, user=user)
                assert result is not None and result.ok
            await export(hub).flush()
            assert hub.episodes is not None
            await hub.episodes.stop()  # every episode in the store before the CLI reads it

    asyncio.run(talk())
    running = (data / "training" / "episodes.jsonl").read_text(encoding="utf-8")
    assert SECRET not in running and "[REDACTED]" in running
    assert [json.loads(x) for x in running.splitlines()] == [
        {"prompt": "Hello", "completion": "Hi Ann."},
        {"prompt": "What is the key?", "completion": "The key is [REDACTED], ünïcode"},
    ]  # a run that answered nothing is no training line, as in the export
    config = tmp_path / "config.toml"
    config.write_text(f'[hub]\ndata_dir = "{data}"\ncontexts_dir = "{data}"\n[model]\napi_key = "{SECRET}"\n')
    out = tmp_path / "export.jsonl"
    assert cli_main(["export-training", "--config", str(config), "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == running  # the same lines, the same masking


async def test_the_file_is_rotated_by_size_and_nothing_is_lost(tmp_path: Path) -> None:
    data = tmp_path / "data"
    model = ScriptedModel(default=reply("x" * 400))
    async with make_hub(data, model, episodes=False, training_max_bytes=1024, training_backups=3) as hub:
        for i in range(8):
            assert (await hub.send("cli:session", {"user": "ann"}, f"message {i}", user="ann")).ok
        await export(hub).flush()
    files = sorted((data / "training").iterdir())
    names = [p.name for p in files]
    assert names == ["episodes.jsonl", "episodes.jsonl.1", "episodes.jsonl.2", "episodes.jsonl.3"]
    assert all(p.stat().st_size <= 1024 for p in files)
    prompts = sorted(json.loads(line)["prompt"] for p in files for line in p.read_text().splitlines())
    assert prompts == [f"message {i}" for i in range(8)]  # two lines a file: the 3 backups hold all


async def test_a_failed_write_is_logged_and_the_run_still_completes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    model = ScriptedModel([reply("one"), reply("two")])
    async with make_hub(data, model, episodes=False) as hub:
        path = data / "training" / "episodes.jsonl"
        path.mkdir(parents=True)  # a directory where the file should be: every write fails
        with caplog.at_level(logging.ERROR, logger="hub.memory"):
            assert (await hub.send("cli:session", {"user": "ann"}, "hi", user="ann")).ok
            await export(hub).flush()
        assert "could not append" in caplog.text and str(path) in caplog.text
        path.rmdir()  # fixed: the next run's line is written
        assert (await hub.send("cli:session", {"user": "ann"}, "again", user="ann")).ok
        await export(hub).flush()
        assert [json.loads(x)["prompt"] for x in path.read_text().splitlines()] == ["again"]

"""Redaction at the point of entry: a known secret that a user pastes, an action returns or
the model writes is masked as it enters, so no prompt (either style), store, event log,
episode or training export ever holds it.
"""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import hub_cli
from hub import Extension, Hub, NoArgs, ScriptedModel, action, load_config
from hub.cli import main as cli_main
from hub.memory import MiniLMEmbedder
from hub.redact import MASK
from hub_cli import CliSettings

SECRET = "sk-pasted-0123456789abcdef"  # the model's api_key, through ${HUB_TEST_API_KEY}
RESULT_SECRET = "result-secret-abcdef012345"  # a tool's token, under a key named like a secret


@action(name="whoami", description="The bot's credentials.")
async def whoami(args: NoArgs, ctx: Any) -> dict[str, str]:
    return {"account": "bot", "token": RESULT_SECRET, "key": SECRET}


def write_config(tmp_path: Path, style: str) -> Path:
    (tmp_path / "contexts").mkdir()
    (tmp_path / "contexts" / "default.toml").write_text('name = "Hub"\ninstructions = "Be brief."\n')
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
[hub]
data_dir = "data"
[model]
provider = "openai"
api_key = "${{HUB_TEST_API_KEY}}"
prompt_style = "{style}"
[extensions.tools]
bot_token = "{RESULT_SECRET}"
""",
        encoding="utf-8",
    )
    return path


def everything_on_disk(data: Path) -> bytes:
    """The SQLite database as SQL text, and every byte of the Chroma store."""
    with sqlite3.connect(data / "hub.db") as db:
        dump = "\n".join(db.iterdump()).encode()
    chroma = b"".join(p.read_bytes() for p in sorted((data / "chroma").rglob("*")) if p.is_file())
    return dump + chroma


@pytest.mark.parametrize("style", ["xml", "chat"])
def test_a_known_secret_never_reaches_a_prompt_a_store_an_episode_or_an_export(
    tmp_path: Path, minilm: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    monkeypatch.setenv("HUB_TEST_API_KEY", SECRET)
    path = write_config(tmp_path, style)
    config = load_config(path)
    call = '<response><action_call name="whoami">{}</action_call></response>'
    model = ScriptedModel(
        [
            call if style == "xml" else f"Noted. Your key {SECRET} is safe with me.",
            f"<response><output>The token is {RESULT_SECRET}; yours is {SECRET}.</output></response>",
            "<response><output>Still here.</output></response>",
        ]
    )
    out = io.StringIO()
    shown: list[str] = []

    async def talk() -> None:
        cli = hub_cli.extension(CliSettings(stdin=False), out=out)
        hub = Hub(config, model=model, load_extensions=False, extensions=[cli, Extension("tools", actions=[whoami])])
        assert hub.episodes is not None
        hub.episodes.embedder = minilm
        async with hub:
            first = await hub.send("cli:session", {"user": "ann"}, f"my key is {SECRET}, keep it", user="ann")
            second = await hub.send("cli:session", {"user": "ann"}, {"note": f"again: {SECRET}"}, user="ann")
            assert first is not None and first.ok and second is not None and second.ok
            await hub.episodes.flush()
            episodes = await hub.episodes.episodes()
            assert len(episodes) == 2
            shown.extend(json.dumps([e.prompt, e.completion, e.digest, e.render()]) for e in episodes)
            for result in (first, second):
                shown.append(repr(result.logs))
                shown.append(repr(await hub.runs.events(result.run_id)))
            shown.append(json.dumps(await hub.memory.get("working-memory:cli:session:ann")))

    asyncio.run(talk())

    assert len(model.requests) >= 2
    for request in model.requests:  # every prompt, the second run's history (from the kv table) included
        for text in (request.system, *(m["content"] for m in request.messages)):
            assert SECRET not in text and RESULT_SECRET not in text
    assert any(MASK in m["content"] for r in model.requests for m in r.messages)
    for text in shown:  # run results, event logs, working memory, episodes
        assert SECRET not in text and RESULT_SECRET not in text
    assert MASK in shown[0]  # the episode keeps the masked input, not nothing
    assert SECRET not in out.getvalue() and RESULT_SECRET not in out.getvalue()  # nor what the user was sent

    disk = everything_on_disk(tmp_path / "data")  # kv table, run events, inbox, Chroma
    assert SECRET.encode() not in disk and RESULT_SECRET.encode() not in disk
    assert MASK.encode() in disk

    export = tmp_path / "train.jsonl"
    assert cli_main(["export-training", "--config", str(path), "--out", str(export), "--all-states"]) == 0
    exported = export.read_text(encoding="utf-8")
    assert exported.count("\n") == 2 and MASK in exported
    assert SECRET not in exported and RESULT_SECRET not in exported


def test_with_no_secrets_text_enters_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    from hub.redact import Redactor

    r = Redactor()
    assert not r
    value = {"a": ["b", 1]}
    assert r.redact_tree(value) is value  # the identity, not a copy
    assert r.redact("x") == "x"

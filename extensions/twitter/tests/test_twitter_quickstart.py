"""The X quick start (README.md and docs/platforms/x.md), followed as written: the shipped
``config.toml`` with the section's ``[extensions.twitter]`` lines and the five keys from the
environment, then a mention answered in dry run (logged, nothing posted), against the
loopback fake of X's API.

What the test changes, and only that: X's address (the fake's, patched into the client), the
data folder (a temporary directory), episodic memory and the terminal off, and the model
(scripted, where the reader exports OPENAI_API_KEY).
"""

from __future__ import annotations

import asyncio
import logging
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from hub import Hub, RunResult, ScriptedModel
from hub.config import config_from_dict
from hub.engine import Plugin
from hub.testing.twitter import FakeTwitter
from hub_twitter import TwitterBot, TwitterSettings, extension, make_client

ROOT = Path(__file__).resolve().parents[3]


SOURCES = {"README.md": r"^## Quick start: X\n(.*?)^## ", "docs/platforms/x.md": r"^## Quick start\n(.*?)^## "}


def quick_start(source: str) -> str:
    match = re.search(SOURCES[source], (ROOT / source).read_text(), re.S | re.M)
    assert match, f"{source} has no X quick start section"
    return match.group(1)


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@pytest.mark.parametrize("source", sorted(SOURCES))
async def test_the_quick_start_answers_a_mention_in_dry_run(
    source: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hub_twitter")
    section = quick_start(source)
    (toml,) = re.findall(r"```toml\n(.*?)```", section, re.S)
    readme = tomllib.loads(re.sub(r"^ +", "", toml, flags=re.M))
    table = readme["extensions"]["twitter"]
    variables = [m.group(1) for v in table.values() if isinstance(v, str) and (m := re.fullmatch(r"\$\{(\w+)\}", v))]
    assert len(variables) == 5 and all(f"{v}=" in section for v in variables), "the section exports every key"
    shipped = tomllib.loads((ROOT / "config.toml").read_text())
    raw = merged(
        merged(shipped, readme),
        {
            "hub": {"data_dir": str(tmp_path / "data"), "contexts_dir": str(ROOT / "contexts"), "shutdown_grace": 1},
            "memory": {"episodes": False},
            "extensions": {"cli": {"enabled": False}},
        },
    )
    async with FakeTwitter() as tw:
        env = {v: f"{tw.user_id}-{v.lower()}" for v in variables}  # an access token starts with the user id
        cfg = config_from_dict(raw, path=tmp_path / "config.toml", env=env)
        settings = TwitterSettings.model_validate(
            {k: v for k, v in cfg.enabled_extensions()["twitter"].items() if k != "enabled"}
        )
        assert settings.dry_run is True

        def client(s: TwitterSettings) -> Any:
            made = make_client(s)
            tw.patch_async_client(made)
            return made

        bot = TwitterBot(settings, client_factory=client, resolve=tw.resolve)
        results: list[RunResult] = []
        done = asyncio.Event()

        class Collect(Plugin):
            async def after_run(self, result: RunResult, ctx: Any) -> None:
                results.append(result)
                done.set()

        mid = tw.push_mention("@hubbot hello", author_id="42", author_username="alice")
        hub = Hub(
            cfg, model=ScriptedModel(["Hello there!"]), load_extensions=False, extensions=[extension(settings, bot=bot)]
        )
        hub.plugins.add(Collect())
        async with hub:
            await asyncio.wait_for(done.wait(), 30)
    ((out,),) = [r.outputs for r in results]
    assert out.data["dry_run"] is True and out.data["in_reply_to"] == mid
    assert tw.sent == []  # dry run: nothing posted
    assert any("would post 1/1 in reply to " + mid in r.getMessage() for r in caplog.records)

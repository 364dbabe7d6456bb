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
from pathlib import Path
from typing import Any

import pytest

from hub import Hub, ScriptedModel
from hub.testing import quickstart as qs
from hub.testing.twitter import FakeTwitter
from hub_twitter import TwitterBot, TwitterSettings, extension, make_client

SOURCES = {"README.md": "Quick start: X", "docs/platforms/x.md": "Quick start"}


@pytest.mark.parametrize("source", sorted(SOURCES))
async def test_the_quick_start_answers_a_mention_in_dry_run(
    source: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hub_twitter")
    section = qs.doc_section(source, SOURCES[source])
    table = qs.toml_of(section)["extensions"]["twitter"]
    variables = [qs.variable_of(v) for v in table.values() if isinstance(v, str) and v.startswith("${")]
    assert len(variables) == 5 and all(f"{v}=" in section for v in variables), "the section exports every key"
    async with FakeTwitter() as tw:
        env = {v: f"{tw.user_id}-{v.lower()}" for v in variables}  # an access token starts with the user id
        cfg = qs.quickstart_config(section, tmp_path / "data", {"hub": {"shutdown_grace": 1}}, env)
        settings = TwitterSettings.model_validate(
            {k: v for k, v in cfg.enabled_extensions()["twitter"].items() if k != "enabled"}
        )
        assert settings.dry_run is True

        def client(s: TwitterSettings) -> Any:
            made = make_client(s)
            tw.patch_async_client(made)
            return made

        bot = TwitterBot(settings, client_factory=client, resolve=tw.resolve)
        finished = qs.Finished()
        mid = tw.push_mention("@hubbot hello", author_id="42", author_username="alice")
        hub = Hub(
            cfg, model=ScriptedModel(["Hello there!"]), load_extensions=False, extensions=[extension(settings, bot=bot)]
        )
        hub.plugins.add(finished)
        async with hub:
            await asyncio.wait_for(finished.done.wait(), 30)
    ((out,),) = [r.outputs for r in finished.results]
    assert out.data["dry_run"] is True and out.data["in_reply_to"] == mid
    assert tw.sent == []  # dry run: nothing posted
    assert any("would post 1/1 in reply to " + mid in r.getMessage() for r in caplog.records)

"""The Discord quick start (README.md and docs/platforms/discord.md), followed as written:
the shipped ``config.toml`` with the section's ``[extensions.discord]`` lines and the token
from the environment, then a mention answered, against the loopback fake of Discord's
gateway and REST API.

What the test changes, and only that: Discord's address (the fake's, patched into discord.py),
the data folder (a temporary directory), episodic memory and the terminal off, and the model
(scripted, where the reader exports OPENAI_API_KEY).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hub import Hub, ScriptedModel
from hub.testing import quickstart as qs
from hub.testing.discord import FakeDiscord
from hub_discord import DiscordSettings, extension

TOKEN = "fake-token"
SOURCES = {"README.md": "Quick start: Discord", "docs/platforms/discord.md": "Quick start"}


@pytest.mark.parametrize("source", sorted(SOURCES))
async def test_the_quick_start_answers_on_discord(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = qs.doc_section(source, SOURCES[source])
    readme = qs.toml_of(section)
    assert "export DISCORD_BOT_TOKEN=" in section and readme["extensions"]["discord"]["enabled"] is True
    cfg = qs.quickstart_config(section, tmp_path / "data", {"hub": {"shutdown_grace": 1}}, {"DISCORD_BOT_TOKEN": TOKEN})
    table = {k: v for k, v in cfg.enabled_extensions()["discord"].items() if k != "enabled"}
    async with FakeDiscord(token=TOKEN) as dc:
        dc.attach(monkeypatch)
        # the settings as the README's table gives them; the fake's own name resolution
        ext = extension(DiscordSettings.model_validate(table), resolve=dc.resolve)
        model = ScriptedModel(['<response><output type="discord:message">Hello there!</output></response>'])
        async with Hub(cfg, model=model, load_extensions=False, extensions=[ext]):
            mid = dc.push_message(dc.channel_id, f"<@{dc.bot_id}> hello")
            (sent,) = await dc.wait_sent(1, timeout=30)
    assert sent["content"] == "Hello there!" and sent["reply_to"] == mid
    assert dc.identifies[0]["token"] == TOKEN

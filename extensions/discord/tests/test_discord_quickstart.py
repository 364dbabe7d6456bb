"""The Discord quick start (README.md and docs/platforms/discord.md), followed as written:
the shipped ``config.toml`` with the section's ``[extensions.discord]`` lines and the token
from the environment, then a mention answered, against the loopback fake of Discord's
gateway and REST API.

What the test changes, and only that: Discord's address (the fake's, patched into discord.py),
the data folder (a temporary directory), episodic memory and the terminal off, and the model
(scripted, where the reader exports OPENAI_API_KEY).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from hub import Hub, ScriptedModel
from hub.config import config_from_dict
from hub.testing.discord import FakeDiscord
from hub_discord import DiscordSettings, extension

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "fake-token"


SOURCES = {
    "README.md": r"^## Quick start: Discord\n(.*?)^## ",
    "docs/platforms/discord.md": r"^## Quick start\n(.*?)^## ",
}


def quick_start(source: str) -> str:
    match = re.search(SOURCES[source], (ROOT / source).read_text(), re.S | re.M)
    assert match, f"{source} has no Discord quick start section"
    return match.group(1)


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@pytest.mark.parametrize("source", sorted(SOURCES))
async def test_the_quick_start_answers_on_discord(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = quick_start(source)
    (toml,) = re.findall(r"```toml\n(.*?)```", section, re.S)
    readme = tomllib.loads(re.sub(r"^ +", "", toml, flags=re.M))
    assert "export DISCORD_BOT_TOKEN=" in section and readme["extensions"]["discord"]["enabled"] is True
    shipped = tomllib.loads((ROOT / "config.toml").read_text())
    raw = merged(
        merged(shipped, readme),
        {
            "hub": {"data_dir": str(tmp_path / "data"), "contexts_dir": str(ROOT / "contexts"), "shutdown_grace": 1},
            "memory": {"episodes": False},
            "extensions": {"cli": {"enabled": False}},
        },
    )
    cfg = config_from_dict(raw, path=tmp_path / "config.toml", env={"DISCORD_BOT_TOKEN": TOKEN})
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

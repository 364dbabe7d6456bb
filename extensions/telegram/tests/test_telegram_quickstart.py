"""The Telegram quick start (README.md and docs/platforms/telegram.md), followed as written:
the shipped ``config.toml`` with the section's ``[extensions.telegram]`` lines, the token
from the environment, and a message to the bot answered, against the loopback fake of
Telegram.

What the test changes, and only that: Telegram's address (the fake's), the data and persona
folders (a temporary directory), episodic memory off (Chroma takes seconds to start), the
terminal off (the test has no terminal), and the model (scripted, where the reader exports
OPENAI_API_KEY).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from hub import Hub, ScriptedModel
from hub.config import config_from_dict
from hub.testing.telegram import FakeTelegram

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "123456789:AAH-quick-start-token"


SOURCES = {
    "README.md": r"^## Quick start: Telegram\n(.*?)^## ",
    "docs/platforms/telegram.md": r"^## Quick start\n(.*?)^## ",
}


def quick_start(source: str) -> str:
    """The Telegram quick start section of ``source``."""
    match = re.search(SOURCES[source], (ROOT / source).read_text(), re.S | re.M)
    assert match, f"{source} has no Telegram quick start section"
    return match.group(1)


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_quick_start_exports_the_variable_the_config_reads(source: str) -> None:
    section = quick_start(source)
    (toml,) = re.findall(r"```toml\n(.*?)```", section, re.S)
    table = tomllib.loads(re.sub(r"^ +", "", toml, flags=re.M))["extensions"]["telegram"]
    assert table["enabled"] is True
    var = re.fullmatch(r"\$\{(\w+)\}", table["token"])
    assert var, "the token comes from the environment"
    assert f"export {var.group(1)}=" in section


@pytest.mark.parametrize("source", sorted(SOURCES))
async def test_the_quick_start_answers_on_telegram(source: str, tmp_path: Path) -> None:
    section = quick_start(source)
    (toml,) = re.findall(r"```toml\n(.*?)```", section, re.S)
    shipped = tomllib.loads((ROOT / "config.toml").read_text())
    raw = merged(shipped, tomllib.loads(re.sub(r"^ +", "", toml, flags=re.M)))
    async with FakeTelegram() as tg:
        raw = merged(
            raw,
            {
                "hub": {"data_dir": str(tmp_path / "data"), "contexts_dir": str(ROOT / "contexts")},
                "memory": {"episodes": False},
                "extensions": {"cli": {"enabled": False}, "telegram": {"base_url": f"{tg.base_url}/bot"}},
            },
        )
        env = {"TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": "sk-test"}
        cfg = config_from_dict(raw, path=tmp_path / "config.toml", env=env)
        model = ScriptedModel(['<response><output type="telegram:send">Hello! How can I help?</output></response>'])
        async with Hub(cfg, model=model):
            tg.push_message(chat_id=42, text="hello", first_name="Ada")
            (sent,) = await tg.wait_sent(1, timeout=30)
    assert sent["chat_id"] == 42 and sent["text"] == "Hello! How can I help?"
    # the bot signed in with the token the reader exported
    assert all(TOKEN in r.path for r in tg.requests if r.path.startswith("/bot"))

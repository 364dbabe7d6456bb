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

from pathlib import Path

import pytest

from hub import Hub, ScriptedModel
from hub.testing import quickstart as qs
from hub.testing.telegram import FakeTelegram

TOKEN = "123456789:AAH-quick-start-token"
SOURCES = {"README.md": "Quick start: Telegram", "docs/platforms/telegram.md": "Quick start"}


def quick_start(source: str) -> str:
    """The Telegram quick start section of ``source``."""
    return qs.doc_section(source, SOURCES[source])


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_quick_start_exports_the_variable_the_config_reads(source: str) -> None:
    section = quick_start(source)
    table = qs.toml_of(section)["extensions"]["telegram"]
    assert table["enabled"] is True
    var = qs.variable_of(table["token"])  # the token comes from the environment
    assert f"export {var}=" in section


@pytest.mark.parametrize("source", sorted(SOURCES))
async def test_the_quick_start_answers_on_telegram(source: str, tmp_path: Path) -> None:
    section = quick_start(source)
    async with FakeTelegram() as tg:
        changes = {"extensions": {"telegram": {"base_url": f"{tg.base_url}/bot"}}}
        env = {"TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": "sk-test"}
        cfg = qs.quickstart_config(section, tmp_path / "data", changes, env)
        model = ScriptedModel(['<response><output type="telegram:send">Hello! How can I help?</output></response>'])
        async with Hub(cfg, model=model):
            tg.push_message(chat_id=42, text="hello", first_name="Ada")
            (sent,) = await tg.wait_sent(1, timeout=30)
    assert sent["chat_id"] == 42 and sent["text"] == "Hello! How can I help?"
    # the bot signed in with the token the reader exported
    assert all(TOKEN in r.path for r in tg.requests if r.path.startswith("/bot"))

"""``timeline_extension``: a public timeline's extension from its bot, or from the bot's class,
its settings and a client factory (what Mastodon's and Bluesky's ``extension()`` share)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from hub.platform import PublicSettings, timeline_extension

WORDS = {"thread": "t", "instructions": "i", "reply": "r", "mentions": "m", "description": "d"}


class Bot:
    def __init__(self, settings: PublicSettings, *, client_factory: Any = None) -> None:
        self.settings, self.client_factory = settings, client_factory

    async def start(self, hub: Any) -> None: ...

    async def stop(self) -> None: ...

    async def subscribe(self, send: Any, hub: Any) -> Any: ...

    async def reply(self, text: str, ctx: Any) -> dict[str, Any]:
        return {"text": text}


def test_the_bot_is_built_from_its_settings_and_client_factory_and_its_library_quieted() -> None:
    settings, factory = PublicSettings(), object()
    logging.getLogger("chatty.client").setLevel(logging.DEBUG)
    ext = timeline_extension(
        "x", settings=settings, make_bot=Bot, client_factory=factory, loggers=["chatty.client"], **WORDS
    )
    assert [c.type for c in ext.contexts] == ["x:thread"] and [i.type for i in ext.inputs] == ["x:mention"]
    (service,) = ext.services
    bot = service.start.__self__  # type: ignore[attr-defined]
    assert isinstance(bot, Bot) and bot.settings is settings and bot.client_factory is factory
    assert logging.getLogger("chatty.client").level >= logging.WARNING


def test_a_given_bot_brings_its_own_settings_and_client() -> None:
    settings = PublicSettings()
    bot = Bot(settings)
    assert timeline_extension("x", bot, settings=settings, make_bot=Bot, **WORDS).services[0].start == bot.start
    with pytest.raises(ValueError, match="its own settings and client_factory"):
        timeline_extension("x", bot, settings=settings, make_bot=Bot, client_factory=object(), **WORDS)
    with pytest.raises(ValueError, match="its own settings and client_factory"):
        timeline_extension("x", bot, settings=PublicSettings(), make_bot=Bot, **WORDS)
    with pytest.raises(TypeError, match="give a bot, or make_bot and settings"):
        timeline_extension("x", settings=settings, **WORDS)

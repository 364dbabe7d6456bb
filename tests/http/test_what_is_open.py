"""At start the endpoint says what it serves open, what behind the token, and what is off:
an empty ``[http] token`` must not leave /metrics open and the dashboard off in silence."""

from __future__ import annotations

import logging

import aiohttp
import pytest

from hub import HubConfig
from hub.config import HttpSection

TOKEN = "0123456789abcdef0123"


def said_at_start(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.name == "hub.http")


async def test_without_a_token_the_start_says_metrics_is_open_and_the_dashboard_off(
    config: HubConfig, make_chat_hub, caplog: pytest.LogCaptureFixture
) -> None:
    config.http = HttpSection(port=0)
    caplog.set_level(logging.INFO, logger="hub.http")
    async with make_chat_hub() as hub, aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{hub.http.port}"
        async with session.get(f"{base}/metrics") as r:
            assert r.status == 200  # what the line says is what the endpoint does
        async with session.get(f"{base}/ui/") as r:
            assert r.status == 404
    said = said_at_start(caplog)
    assert "open to anyone who reaches" in said and "/metrics" in said
    assert "off" in said and "/ui/" in said and "/events" in said
    warned = [r for r in caplog.records if r.name == "hub.http" and "no [http] token" in r.getMessage()]
    assert warned and warned[0].levelno == logging.WARNING


async def test_with_a_token_the_start_says_what_it_guards(
    config: HubConfig, make_chat_hub, caplog: pytest.LogCaptureFixture
) -> None:
    config.http = HttpSection(port=0, token=TOKEN, metrics=False)
    caplog.set_level(logging.INFO, logger="hub.http")
    async with make_chat_hub():
        pass
    said = said_at_start(caplog)
    assert "behind the [http] token: /events, /runs, /reviews, /ui/" in said
    assert "/metrics is off" in said
    assert TOKEN not in said

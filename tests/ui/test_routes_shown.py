"""The dashboard shows each conversation's route (``[[routes]]``)."""

from __future__ import annotations

from pathlib import Path

from hub.config import RouteSection

from .conftest import client, dashboard, login, make_config


async def test_a_conversation_page_shows_the_route_it_matches(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    cfg.routes = [
        RouteSection(match="telegram:chat:-5*", actions=[]),
        RouteSection(match="telegram:chat:4*", actions=["getWeather", "time__*"]),
    ]
    async with dashboard(tmp_path, config=cfg) as d, client() as s:
        await login(s, d.base)
        async with s.get(d.base + "/ui/conversation?context=telegram:chat:42") as resp:
            routed = await resp.text()
        async with s.get(d.base + "/ui/conversation?context=telegram:chat:7") as resp:
            plain = await resp.text()
    assert "Route: <code>telegram:chat:4*</code> (#2 of [[routes]])" in routed
    assert "actions <code>getWeather</code>, <code>time__*</code>" in routed
    assert "No route matches it: the defaults apply." in plain

"""The access page: the config's allow-lists beside the pairings, and the pairings' rows polled
so that a new code shows up without a reload."""

from __future__ import annotations

import html
from pathlib import Path

from .conftest import TG_TOKEN, client, dashboard, login, make_config


async def test_the_allow_lists_of_the_config_are_shown_and_no_token(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    cfg.extensions = {
        "telegram": {"token": TG_TOKEN, "allowed_users": [1001, "@ada"], "dm_policy": "pairing"},
        "discord": {"token": "discord-secret-token-0123456789", "allowed_users": [], "ignored_users": ["99"]},
        "twitter": {"enabled": False, "allowed_users": ["nobody"]},
    }
    async with dashboard(tmp_path, config=cfg) as d, client() as s:
        await login(s, d.base)
        async with s.get(d.base + "/ui/access") as resp:
            page = html.unescape(await resp.text())
        tg = page.split('id="allow-telegram"', 1)[1].split("</section>", 1)[0]
        assert "dm_policy = <code>pairing</code>" in tg
        assert '<code class="entry">1001</code> <code class="entry">@ada</code>' in tg
        dc = page.split('id="allow-discord"', 1)[1].split("</section>", 1)[0]
        assert '<code>allowed_users</code></dt><dd><span class="empty">empty: everyone</span>' in dc
        assert '<code>ignored_users</code></dt><dd><code class="entry">99</code>' in dc
        assert 'id="allow-twitter"' not in page  # not enabled
        assert TG_TOKEN not in page and "discord-secret-token" not in page


async def test_a_new_pairing_code_is_in_the_polled_rows(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d, client() as s:
        await login(s, d.base)
        async with s.get(d.base + "/ui/access") as resp:
            page = await resp.text()
        assert 'hx-get="/ui/access/rows" hx-trigger="every 2s"' in page
        async with s.get(d.base + "/ui/access/rows") as resp:
            assert "No pairings" in await resp.text()
        pending = await d.hub.access.check("telegram", "2002", "pairing", user_name="Bea", user_handle="bea_b")
        async with s.get(d.base + "/ui/access/rows") as resp:
            rows = await resp.text()
        assert rows.startswith('<tbody id="pairings"') and "<html" not in rows
        assert f'<code class="code">{pending.code}</code>' in rows and 'name="csrf"' in rows
        assert '<span class="name">Bea</span> <span class="handle">@bea_b</span> <code class="uid">2002</code>' in rows

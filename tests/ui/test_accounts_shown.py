"""The dashboard's health page shows each account of a platform on a row of its own."""

from __future__ import annotations

import re
from pathlib import Path

from .conftest import FakeTelegram, client, dashboard, login, wait_until


async def test_the_health_page_has_a_row_per_account(tmp_path: Path) -> None:
    async with FakeTelegram(bot_id=777, token="777:support") as support:
        accounts = {"support": {"token": "777:support", "base_url": f"{support.base_url}/bot"}}
        async with dashboard(tmp_path, accounts=accounts) as d, client() as s:
            await login(s, d.base)
            metrics = d.hub.metrics.registry
            await wait_until(
                lambda: metrics.get_sample_value("hub_platform_connected", {"platform": "telegram/support"}) == 1,
                timeout=10,
            )
            async with s.get(d.base + "/ui/health") as resp:
                page = await resp.text()
    rows = re.findall(r'<tr><td>(telegram[^<]*)</td><td data-label="listening">yes</td>', page)
    assert rows == ["telegram", "telegram/support"]

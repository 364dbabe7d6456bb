"""The Bluesky quick start (README.md and docs/platforms/bluesky.md), followed as written:
the shipped ``config.toml`` with the section's ``[extensions.bluesky]`` lines (the bot's
handle as written), the app password from the variable it exports, the extension found by
its entry point as ``hub run`` finds it; then a mention answered in dry run (the reply
logged, nothing posted), against the loopback fake PDS.

What the test changes, and only that: the PDS's address (the fake's, where the SDK goes to
bsky.social), the app password's value (the fake's), the data folder (a temporary
directory), episodic memory and the terminal off, and the model (scripted, where the reader
exports OPENAI_API_KEY).
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest

from hub import Hub, ScriptedModel
from hub.testing import quickstart as qs
from hub.testing.bluesky import APP_PASSWORD, BOT_HANDLE, FakeBluesky

SOURCES = {"README.md": "Quick start: Bluesky", "docs/platforms/bluesky.md": "Quick start"}


@pytest.mark.parametrize("source", sorted(SOURCES))
async def test_the_quick_start_answers_a_mention_in_dry_run(
    source: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hub_bluesky")
    text = qs.doc_section(source, SOURCES[source])
    table = qs.toml_of(text)["extensions"]["bluesky"]
    assert table["enabled"] is True and table["dry_run"] is True and table["handle"] == BOT_HANDLE
    var = qs.variable_of(table["app_password"])
    assert re.search(rf'export {var}="', text), f"the section exports {var}"
    async with FakeBluesky() as fake:
        changes = {"hub": {"shutdown_grace": 1}, "extensions": {"bluesky": {"base_url": fake.base_url}}}
        cfg = qs.quickstart_config(text, tmp_path / "data", changes, {var: APP_PASSWORD, "OPENAI_API_KEY": "sk-test"})
        note = fake.mention(f"hello @{BOT_HANDLE}")  # a mention the reader makes from another account
        finished = qs.Finished()
        hub = Hub(cfg, model=ScriptedModel(["Hello there!"]))
        hub.plugins.add(finished)
        async with hub:
            await asyncio.wait_for(finished.done.wait(), 30)  # the first read is at start
    ((out,),) = [r.outputs for r in finished.results]
    assert out.data["dry_run"] is True and fake.state.sent == []  # dry run: nothing posted
    logged = [r.getMessage() for r in caplog.records if "would post" in r.getMessage()]
    assert len(logged) == 1 and note["uri"] in logged[0] and "Hello there!" in logged[0]

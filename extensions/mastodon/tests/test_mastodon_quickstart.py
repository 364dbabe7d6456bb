"""The Mastodon quick start (README.md and docs/platforms/mastodon.md), followed as written:
the shipped ``config.toml`` with the section's ``[extensions.mastodon]`` lines, the access
token from the variable it exports, the extension found by its entry point as ``hub run``
finds it; then a mention answered in dry run (the reply logged, nothing posted), against the
loopback fake instance.

What the test changes, and only that: the instance's address (the fake's, where the reader
writes theirs), the token's value (the fake's), the data folder (a temporary directory),
episodic memory and the terminal off, and the model (scripted, where the reader exports
OPENAI_API_KEY).
"""

from __future__ import annotations

import asyncio
import logging
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from hub import Hub, RunResult, ScriptedModel
from hub.config import config_from_dict
from hub.engine import Plugin
from hub.testing.mastodon import FakeMastodon

ROOT = Path(__file__).resolve().parents[3]
SOURCES = {
    "README.md": r"^## Quick start: Mastodon\n(.*?)^## ",
    "docs/platforms/mastodon.md": r"^## Quick start\n(.*?)^## ",
}
TOKEN = "test-token"  # the one the fake accepts


def section(source: str) -> str:
    match = re.search(SOURCES[source], (ROOT / source).read_text(), re.S | re.M)
    assert match, f"{source} has no Mastodon quick start section"
    return match.group(1)


def toml_of(text: str) -> dict[str, Any]:
    (block,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    return tomllib.loads(re.sub(r"^ +", "", block, flags=re.M))


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@pytest.mark.parametrize("source", sorted(SOURCES))
async def test_the_quick_start_answers_a_mention_in_dry_run(
    source: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hub_mastodon")
    text = section(source)
    table = toml_of(text)["extensions"]["mastodon"]
    assert table["enabled"] is True and table["dry_run"] is True
    (var,) = re.findall(r"\$\{(\w+)\}", table["access_token"])
    assert re.search(rf'export {var}="', text), f"the section exports {var}"
    shipped = tomllib.loads((ROOT / "config.toml").read_text())
    async with FakeMastodon() as fake:
        raw = merged(
            merged(shipped, toml_of(text)),
            {
                "hub": {
                    "data_dir": str(tmp_path / "data"),
                    "contexts_dir": str(ROOT / "contexts"),
                    "shutdown_grace": 1,
                },
                "memory": {"episodes": False},
                "extensions": {"cli": {"enabled": False}, "mastodon": {"base_url": fake.base_url}},
            },
        )
        cfg = config_from_dict(raw, path=tmp_path / "config.toml", env={var: TOKEN, "OPENAI_API_KEY": "sk-test"})
        note = fake.mention("hello")  # a mention the reader makes from another account
        done = asyncio.Event()
        results: list[RunResult] = []

        class Collect(Plugin):
            async def after_run(self, result: RunResult, ctx: Any) -> None:
                results.append(result)
                done.set()

        hub = Hub(cfg, model=ScriptedModel(["Hello there!"]))
        hub.plugins.add(Collect())
        async with hub:
            await asyncio.wait_for(done.wait(), 30)
    ((out,),) = [r.outputs for r in results]
    assert out.data["dry_run"] is True and fake.state.sent == []  # dry run: nothing posted
    logged = [r.getMessage() for r in caplog.records if "would post" in r.getMessage()]
    assert len(logged) == 1 and note["status"]["id"] in logged[0] and "Hello there!" in logged[0]

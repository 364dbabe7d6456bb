"""Discord shards across workers (``shard_count``): each shard's gateway connection is held
by the worker that holds its lease, and a worker that stops hands its shards over.

Two hubs on one data dir are two workers sharing one store; the fake routes each guild's
events to its shard (``(guild_id >> 22) % shard_count``), as Discord does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hub import Hub, ScriptedModel
from hub.testing import temp_config
from hub.testing.discord import FakeDiscord

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # discord imports audioop
    from hub_discord import DiscordSettings, extension


def worker(tmp_path: Path, name: str) -> Hub:
    cfg = temp_config(tmp_path)  # the workers share tmp_path's store
    cfg.hub.shutdown_grace = 1.0
    settings = DiscordSettings(token="fake-token", shard_count=2, lease_ttl=3, guild_ready_timeout=0.05)
    model = ScriptedModel(lambda request: f'<response><output type="discord:message">{name}</output></response>')
    return Hub(cfg, model=model, load_extensions=False, extensions=[extension(settings)])


class Said(logging.Handler):
    """Sets ``event`` once ``count`` log records have contained ``text``."""

    def __init__(self, text: str, count: int, event: asyncio.Event) -> None:
        super().__init__(logging.INFO)
        self.text, self.left, self.event = text, count, event

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.left -= 1
            if self.left <= 0:
                self.event.set()


async def until(predicate: Callable[[], bool], timeout: float = 15) -> None:
    """Wait until ``predicate()`` holds (what it reads changes inside the clients)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def connections(hub: Hub) -> float | None:
    return hub.metrics.registry.get_sample_value("hub_platform_connected", {"platform": "discord"})


def shard_identifies(dc: FakeDiscord) -> list[list[int]]:
    return [d["shard"] for d in dc.identifies]


async def answered(dc: FakeDiscord, channel_id: int) -> str:
    mid = dc.push_message(channel_id, f"<@{dc.bot_id}> hello")
    await dc.wait_for(lambda: any(s["reply_to"] == mid for s in dc.sent), timeout=15)
    (reply,) = [s for s in dc.sent if s["reply_to"] == mid]
    return str(reply["content"])


async def test_shards_are_held_by_one_worker_each_and_taken_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hub.store")
    async with FakeDiscord() as dc:
        dc.attach(monkeypatch)
        # a second guild on the other shard: a guild id's shard is (id >> 22) % 2
        other_guild = dc.add_guild("Other Guild", guild_id=dc.guild_id + (1 << 22))
        other_channel = dc.add_text_channel(other_guild, "general")
        first = worker(tmp_path, "first")
        standing_by = asyncio.Event()
        said = Said("standing by", 2, standing_by)
        logging.getLogger("hub.store").addHandler(said)
        async with contextlib.AsyncExitStack() as stack:
            stack.callback(logging.getLogger("hub.store").removeHandler, said)
            await stack.enter_async_context(first)
            await dc.wait_for(lambda: len(dc.identifies) == 2, timeout=15)
            assert sorted(shard_identifies(dc)) == [[0, 2], [1, 2]]
            second = worker(tmp_path, "second")
            await stack.enter_async_context(second)
            # the second worker is refused both shards (it says so) and connects none; the log
            # line is awaited itself (the fake would only re-check a predicate on its own requests)
            await asyncio.wait_for(standing_by.wait(), timeout=15)
            assert len(dc.identifies) == 2
            await until(lambda: connections(first) == 2)  # both shards ready: /ui/health's "connected"
            assert connections(second) is None  # standing by, never connected
            # each guild's message reaches the one connection of its shard, and is answered once
            assert await answered(dc, dc.channel_id) == "first"
            assert await answered(dc, other_channel) == "first"
            await first.stop()
            await dc.wait_for(lambda: len(dc.identifies) == 4, timeout=15)
            assert sorted(shard_identifies(dc)[2:]) == [[0, 2], [1, 2]]
            assert await answered(dc, dc.channel_id) == "second"
            assert await answered(dc, other_channel) == "second"
            assert len(dc.sent) == 4
            await until(lambda: connections(second) == 2)
            assert connections(first) == 0
            for shard in (0, 1):
                lease = await second.leases.holder(f"discord:shard:{dc.bot_id}:{shard}")
                assert lease is not None and lease.holder == second.worker


def test_shard_count_is_checked() -> None:
    with pytest.raises(ValueError, match="shard_count"):
        DiscordSettings(token="t", shard_count=-1)
    assert DiscordSettings(token="t").shard_count == 0  # one connection, no leases


async def test_a_single_worker_connects_every_shard_and_stops_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeDiscord() as dc:
        dc.attach(monkeypatch)
        hub = worker(tmp_path, "only")
        async with hub:
            await dc.wait_for(lambda: len(dc.identifies) == 2, timeout=15)
            assert await answered(dc, dc.dm_channel_id) == "only"  # DMs come on shard 0
        for shard in (0, 1):
            assert await _holder(tmp_path, f"discord:shard:{dc.bot_id}:{shard}") is None  # released at stop


async def _holder(tmp_path: Path, name: str) -> Any:
    from hub.store.sql import Database, SqlLeaseStore

    async with Database(tmp_path / "data" / "hub.db") as db:
        store = SqlLeaseStore(db)
        await store.open()
        return await store.holder(name)

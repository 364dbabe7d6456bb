"""A store outage is explicit: /healthz answers degraded, /metrics counts it, and the hub
recovers by itself when the store is back (no silent fallback to memory)."""

from __future__ import annotations

import asyncio
import sqlite3

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hub import HubConfig
from hub.config import HttpSection
from hub.errors import StoreError

TOKEN = "outage-token-0123456789"
BEARER = {"Authorization": f"Bearer {TOKEN}"}  # /healthz tells why it is degraded to the token only


def _samples(text: str) -> dict[str, float]:
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


async def test_an_outage_turns_healthz_degraded_and_is_counted(config: HubConfig, make_hub) -> None:
    config.http = HttpSection(port=0, token=TOKEN)
    hub = make_hub()
    db = hub._db
    assert db is not None
    db.busy_timeout, db.busy_retries, db.retry_delay, db.degraded_for = 0.01, 1, 0.001, 0.0
    async with hub, aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{hub.http.port}"
        async with session.get(f"{base}/healthz") as resp:
            assert resp.status == 200 and (await resp.json())["status"] == "ok"
        other = sqlite3.connect(db.path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock: writes cannot land
        try:
            with pytest.raises(StoreError) as ei:
                await hub.memory.set("memory:cli:session:x", {"n": 1})
            assert ei.value.store == "sqlite" and ei.value.operation == "write"
            async with session.get(f"{base}/healthz") as resp:
                assert resp.status == 503 and await resp.json() == {"status": "degraded"}  # no detail without the token
            async with session.get(f"{base}/healthz", headers=BEARER) as resp:
                body = await resp.json()
                assert resp.status == 503 and body["status"] == "degraded"
                assert "database is locked" in body["store"]
            async with session.get(f"{base}/metrics", headers=BEARER) as resp:
                got = _samples(await resp.text())
            assert got["hub_store_failed_writes_total"] >= 1
            assert got["hub_store_errors_total"] >= 1
            assert got["hub_store_degraded"] == 1
        finally:
            other.execute("ROLLBACK")
            other.close()
        await hub.memory.set("memory:cli:session:x", {"n": 2})  # the store is back
        assert await hub.memory.get("memory:cli:session:x") == {"n": 2}
        async with session.get(f"{base}/healthz") as resp:
            assert resp.status == 200 and (await resp.json())["status"] == "ok"
        async with session.get(f"{base}/metrics", headers=BEARER) as resp:
            assert _samples(await resp.text())["hub_store_degraded"] == 0


async def test_hub_health_reports_a_failing_store_from_the_heartbeat(
    config: HubConfig, make_hub, tmp_path, capsys
) -> None:
    from hub.cli import HEARTBEAT, main
    from hub.features import Heartbeat

    toml = tmp_path / "config.toml"
    toml.write_text(f'[hub]\ndata_dir = "{config.data_dir}"\ncontexts_dir = "{config.contexts_dir}"\n')
    hub = make_hub()
    db = hub._db
    db.busy_timeout, db.busy_retries, db.retry_delay = 0.01, 0, 0.001
    beat = Heartbeat(config.data_dir / HEARTBEAT, interval=0.01, health=hub.store_health.problem)
    async with hub:
        await beat.start(hub)
        try:
            other = sqlite3.connect(db.path, isolation_level=None)
            other.execute("BEGIN IMMEDIATE")
            try:
                with pytest.raises(StoreError):
                    await hub.memory.set("k", 1)
            finally:
                other.execute("ROLLBACK")
                other.close()
            path = config.data_dir / HEARTBEAT
            async with asyncio.timeout(10):
                while "degraded" not in (path.read_text() if path.exists() else ""):
                    await asyncio.sleep(0.01)
            capsys.readouterr()
            assert await asyncio.to_thread(main, ["health", "--config", str(toml)]) == 1
            assert "degraded: SQLite" in capsys.readouterr().err
        finally:
            await beat.stop()

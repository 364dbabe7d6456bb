"""Operating a hub on PostgreSQL: ``hub check`` says what it found at ``[store] url`` (or one
line why it could not connect), and ``/healthz`` reports the database."""

from __future__ import annotations

import argparse

import aiohttp

from hub import HubConfig
from hub.cli import cmd_check
from hub.config import HttpSection
from hub.store.sql import SCHEMA_VERSION, PgDatabase
from hub.testing.postgres import temporary_schema


async def test_check_connects_and_says_what_it_found(config: HubConfig, capsys) -> None:
    async with temporary_schema() as url:
        config.store.url = url
        assert await cmd_check(config, argparse.Namespace()) == 0
        assert "no hub tables yet" in capsys.readouterr().out
        async with PgDatabase(url) as db:
            await db.write(
                "INSERT INTO inbox (id, context, data, state, received) VALUES (?, ?, ?, 'received', 1.0)",
                ("i1", "chat:1", "{}"),
            )
        assert await cmd_check(config, argparse.Namespace()) == 0
        out = capsys.readouterr().out
    assert "store: PostgreSQL 1" in out and url.split("?")[0] in out
    assert f"schema version {SCHEMA_VERSION} (current), 0 runs, 1 inputs waiting" in out


async def test_check_says_in_one_line_why_it_cannot_connect(config: HubConfig, capsys) -> None:
    config.store.url = "postgresql://hub:s3cret-pw@127.0.0.1:1/hub"  # nothing listens on port 1
    config.store.connect_timeout = 2
    assert await cmd_check(config, argparse.Namespace()) == 2
    err = capsys.readouterr().err
    [line] = [x for x in err.splitlines() if x.startswith("error:")]
    assert line.startswith("error: store.url: cannot connect to PostgreSQL postgresql://hub:***@127.0.0.1:1/hub")
    assert "s3cret-pw" not in err


async def test_healthz_reports_the_database(config: HubConfig, make_hub) -> None:
    token = "pg-ops-token-0123456789"
    config.http = HttpSection(port=0, token=token)
    async with temporary_schema() as url:
        config.store.url = url
        async with make_hub() as hub, aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{hub.http.port}/healthz"
            async with session.get(url) as resp:  # anyone: the status, nothing of the database
                assert resp.status == 200 and await resp.json() == {"status": "ok"}
            async with session.get(url, headers={"Authorization": f"Bearer {token}"}) as resp:
                body = await resp.json()
    assert resp.status == 200 and body["status"] == "ok"
    db = body["database"]
    assert (db["backend"], db["reachable"], db["schema_version"]) == ("postgresql", True, SCHEMA_VERSION)
    assert db["schema"].startswith("hub_test_") and db["server_version"].startswith("1")


async def test_writes_and_reads_survive_the_servers_connections_dying() -> None:
    import asyncpg

    from hub.store.sql import SqlMemoryStore

    async with temporary_schema() as url:
        async with PgDatabase(f"{url}&application_name=hub_victim", pool_size=2) as db:
            store = SqlMemoryStore(db)
            await store.open()
            await store.set("memory:a", {"n": 1})
            admin = await asyncpg.connect(url)
            try:
                killed = await admin.fetchval(
                    "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'hub_victim'"
                )
            finally:
                await admin.close()
            assert killed >= 1  # every connection of the pool is gone (as when the server restarts)
            await store.set("memory:a", {"n": 2})  # on a new connection: nothing lost, no error
            await store.set("memory:b", {"n": 3})
            assert await store.get("memory:a") == {"n": 2} and await store.keys("memory:") == ["memory:a", "memory:b"]
            assert db.failed_writes == 0 and db.lost_writes == 0


def test_the_password_in_store_url_is_a_secret(config: HubConfig) -> None:
    from hub.redact import Redactor

    config.store.url = "postgresql://hub:pw-4f9a2c71e8@db.internal/hub"
    assert "pw-4f9a2c71e8" not in Redactor.from_config(config, env={}).redact("connect pw-4f9a2c71e8 failed")


async def test_the_command_line_reads_what_the_workers_wrote(config: HubConfig, make_hub, capsys) -> None:
    import json

    from hub.cli import cmd_prune, cmd_runs

    async with temporary_schema() as url:
        config.store.url = url
        async with make_hub(["Hello, Ann."]) as hub:
            result = await hub.send("cli:session", {"user": "ann"}, "hi")
        capsys.readouterr()
        runs_args = argparse.Namespace(follow=False, limit=20, state=None, context=None, json=True, raw=False)
        assert await cmd_runs(config, runs_args) == 0
        [line] = capsys.readouterr().out.splitlines()
        assert (json.loads(line)["id"], json.loads(line)["state"]) == (result.run_id, "completed")
        assert await cmd_prune(config, argparse.Namespace(dry_run=True)) == 0
        out = capsys.readouterr().out
    # the run is recent; the handled input has no platform id to recognise a redelivery by,
    # so nothing of it is kept ([hub.retention] redelivery_days)
    assert "would delete 0 runs, 0 run events, 1 inbox rows" in out


def test_a_wrong_store_url_is_named_and_its_password_never_shown(tmp_path) -> None:
    import pytest

    from hub.config import load_config
    from hub.errors import ConfigError

    (tmp_path / "config.toml").write_text('[store]\nurl = "mysql://hub:pw-91c3e7a2@db/hub"\n')
    with pytest.raises(ConfigError) as ei:
        load_config(tmp_path / "config.toml")
    assert "store.url" in str(ei.value) and "not a mysql:// URL" in str(ei.value)
    assert "pw-91c3e7a2" not in str(ei.value)


async def test_trace_follow_reads_a_run_from_postgresql(config: HubConfig, make_hub) -> None:
    from hub.cli import follow_run
    from hub.store.sql import PostgresRunStore

    async with temporary_schema() as url:
        config.store.url = url
        async with make_hub(["Hello, Ann."]) as hub:
            result = await hub.send("cli:session", {"user": "ann"}, "hi")
        async with PgDatabase(url) as db:
            seen = [
                (f.what, f.entry.kind if f.entry else None)
                async for f in follow_run(PostgresRunStore(db), result.run_id)
            ]
    assert seen[0] == ("entry", "input") and ("entry", "output") in seen and seen[-1] == ("ended", None)

"""One process per data dir, and a database that is checked at start: through the CLI."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

import pytest

from tests._support.processes import hub_cmd, spawn_hub

CONFIG = """
[hub]
data_dir = "data"
[model]
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key = "unused"
[memory]
episodes = false
[extensions.cli]
enabled = false
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "config.toml").write_text(CONFIG)
    (tmp_path / "contexts").mkdir()
    return tmp_path


async def test_a_second_hub_on_the_same_data_dir_exits_2_naming_the_first(project: Path) -> None:
    first = await spawn_hub("run", cwd=project)
    try:
        lock = project / "data" / "hub.lock"
        async with asyncio.timeout(30):  # until the first hub holds the lock and has written its pid
            while not (lock.exists() and lock.read_text().strip() == str(first.pid)):
                assert first.returncode is None
                await asyncio.sleep(0.05)
        for cmd in ("chat", "run"):
            code, _, err = await hub_cmd(cmd, cwd=project)
            assert code == 2
            lines = err.strip().splitlines()
            assert len(lines) == 1, err
            assert str(project / "data") in lines[0] or "data" in lines[0]
            assert f"pid {first.pid}" in lines[0]
        first.send_signal(signal.SIGKILL)  # the OS drops the lock with the process
        await first.wait()
        code, _, err = await hub_cmd("chat", cwd=project)
        assert code == 0, err
    finally:
        if first.returncode is None:
            first.kill()
            await first.wait()


async def test_a_damaged_database_is_refused(project: Path) -> None:
    data = project / "data"
    data.mkdir()
    db = data / "hub.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [("x" * 500,) for _ in range(200)])
    conn.execute("CREATE INDEX t_x ON t (x)")
    conn.commit()
    conn.close()
    with open(db, "r+b") as f:  # garbage over the second page onwards
        f.seek(4096)
        f.write(b"\xde\xad\xbe\xef" * 2048)
    code, _, err = await hub_cmd("chat", cwd=project)
    assert code == 2
    assert "hub.db is damaged (PRAGMA quick_check" in err and "backup" in err
    assert len(err.strip().splitlines()) == 1


async def test_a_database_that_is_not_one_is_refused(project: Path) -> None:
    (project / "data").mkdir()
    (project / "data" / "hub.db").write_bytes(b"this is not sqlite at all" * 100)
    code, _, err = await hub_cmd("run", cwd=project)
    assert code == 2 and "hub.db is damaged" in err and "not a database" in err


async def test_an_empty_database_in_a_dir_with_history_needs_allow_empty(project: Path) -> None:
    code, _, err = await hub_cmd("chat", cwd=project)  # a first start: nothing to lose
    assert code == 0, err
    db = project / "data" / "hub.db"
    assert db.stat().st_size > 0
    db.write_bytes(b"")  # the database was lost; the lock file shows a hub ran here
    for wal in ("hub.db-wal", "hub.db-shm"):
        (project / "data" / wal).unlink(missing_ok=True)
    code, _, err = await hub_cmd("chat", cwd=project)
    assert code == 2
    assert "hub.db is 0 bytes" in err and "hub.lock" in err and "--allow-empty" in err
    db.unlink()
    (project / "data" / "chroma").mkdir()
    code, _, err = await hub_cmd("run", cwd=project)
    assert code == 2 and "hub.db is missing" in err and "chroma/" in err
    code, _, err = await hub_cmd("chat", "--allow-empty", cwd=project)
    assert code == 0, err
    code, _, err = await hub_cmd("chat", cwd=project)  # it has tables now
    assert code == 0, err

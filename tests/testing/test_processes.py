"""hub.testing.processes' waits and readers, on real child processes and a real SQLite file:
each gives up the way its docstring says (the hub's output in the failure)."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from hub.testing.processes import hub_command, store_rows, until, until_exited


def _child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


async def test_until_fails_with_the_output_of_a_hub_that_exits_first() -> None:
    proc = _child("print('the hub says goodbye'); raise SystemExit(3)")
    with pytest.raises(AssertionError, match=r"the hub exited \(3\): the hub says goodbye"):
        await until(lambda: False, proc, timeout=30)


async def test_until_takes_a_check_that_is_a_coroutine() -> None:
    asked: list[int] = []

    async def third_time() -> bool:
        asked.append(1)
        await asyncio.sleep(0)
        return len(asked) == 3

    await until(third_time, timeout=30)
    assert len(asked) == 3


async def test_until_gives_up_at_its_timeout() -> None:
    with pytest.raises(TimeoutError):
        await until(lambda: False, timeout=0.1)


async def test_until_exited_returns_what_it_wrote_and_leaves_the_exit_code() -> None:
    proc = _child("import sys; print('down'); sys.exit(3)")
    assert (await until_exited(proc)).strip() == "down"
    assert proc.returncode == 3


def test_store_rows_reads_the_store_and_is_empty_before_it_exists(tmp_path: Path) -> None:
    assert store_rows(tmp_path, "SELECT platform_id FROM inbox") == []  # no data folder yet
    (tmp_path / "data").mkdir()
    db = sqlite3.connect(tmp_path / "data" / "hub.db")
    db.execute("CREATE TABLE other (x)")
    db.commit()
    assert store_rows(tmp_path, "SELECT platform_id FROM inbox") == []  # no table yet
    db.execute("CREATE TABLE kv (key, value)")
    db.execute("INSERT INTO kv VALUES ('a', '1'), ('b', '2')")
    db.commit()
    db.close()
    assert store_rows(tmp_path, "SELECT value FROM kv WHERE key = ?", "b") == [("2",)]
    with pytest.raises(sqlite3.OperationalError, match="readonly"):  # the hub's store is never written
        store_rows(tmp_path, "INSERT INTO kv VALUES ('c', '3') RETURNING key")
    with pytest.raises(sqlite3.OperationalError, match="no such column"):  # a mistake is not "no rows yet"
        store_rows(tmp_path, "SELECT missing FROM kv")


async def test_hub_command_runs_the_hub_command_to_its_end(tmp_path: Path) -> None:
    code, out, err = await hub_command(tmp_path, "inbox", "--json", "--config", str(tmp_path / "missing.toml"))
    assert code != 0 and "missing.toml" in out + err

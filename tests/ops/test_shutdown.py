"""SIGTERM: intake stops, runs in flight finish within the bound, the rest are recorded, exit 0.

A real ``hub run`` process, its terminal input fed through a pipe, its model a loopback fake
OpenAI server that takes its time to answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LATENCY = 1.5  # seconds the fake model takes before its first byte


def _serve_model(tmp_path_factory, latency: float) -> Iterator[str]:
    script = tmp_path_factory.mktemp("fake") / "script.json"
    script.write_text(json.dumps(["<response><output>pong</output></response>"]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "hub.testing.openai", "--port", "0", "--latency", str(latency), "--script", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT="), line
        yield f"http://127.0.0.1:{int(line.strip().split('=')[1])}"
    finally:
        proc.kill()  # a fake: its graceful stop would wait for the answer it is holding back
        proc.wait(5)


@pytest.fixture(scope="module")
def fake_model(tmp_path_factory) -> Iterator[str]:
    yield from _serve_model(tmp_path_factory, LATENCY)


@pytest.fixture(scope="module")
def silent_model(tmp_path_factory) -> Iterator[str]:
    """A model that does not answer within any test's life: only the bound can end its run."""
    yield from _serve_model(tmp_path_factory, 3600)


def requests_seen(base: str) -> int:
    with urllib.request.urlopen(f"{base}/stats", timeout=5) as r:
        return json.loads(r.read())["count"]


def start_hub(tmp_path: Path, base: str, grace: float) -> subprocess.Popen[str]:
    (tmp_path / "contexts").mkdir()
    (tmp_path / "contexts" / "default.toml").write_text('name = "Hub"\ninstructions = "Be brief."\n')
    (tmp_path / "config.toml").write_text(
        f"""
[hub]
data_dir = "data"
shutdown_grace = {grace}
[model]
provider = "openai"
base_url = "{base}/v1"
api_key = "test"
max_retries = 0
[extensions.cli]
stdin = true
"""
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "hub.cli", "run", "--config", str(tmp_path / "config.toml"), "--log-format", "json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )


def sigterm_mid_run(proc: subprocess.Popen[str], base: str) -> tuple[int, str, str]:
    before = requests_seen(base)
    proc.stdin.write("ping\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 20
    while requests_seen(base) <= before:  # the model has the request: a run is in flight
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the hub never asked the model"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)  # generous: a loaded machine is slow, not wrong
    return proc.returncode, out, err


def recorded_runs(tmp_path: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(tmp_path / "data" / "hub.db") as db:
        return [tuple(r) for r in db.execute("SELECT state, reason FROM runs")]


def pending_inputs(tmp_path: Path) -> list[str]:
    from hub.store.sql import Database, SqlInbox

    async def read() -> list[str]:
        async with Database(tmp_path / "data" / "hub.db") as db:
            inbox = SqlInbox(db)
            await inbox.open()
            return [p.entry.content for p in await inbox.pending()]

    return asyncio.run(read())


def test_sigterm_lets_a_run_in_flight_finish(tmp_path, fake_model):
    proc = start_hub(tmp_path, fake_model, grace=10)
    rc, out, err = sigterm_mid_run(proc, fake_model)
    assert rc == 0, err
    assert "pong" in out  # the answer still reached the user
    assert recorded_runs(tmp_path) == [("completed", None)]
    assert '"stopping: no new input' in err


def test_sigterm_past_the_bound_records_the_run_and_keeps_its_input(tmp_path, silent_model):
    """The model never answers, so the hub exiting at all shows that the bound cut the run;
    how soon it does is a speed, measured in bench/, not asserted here."""
    proc = start_hub(tmp_path, silent_model, grace=0.2)
    rc, out, err = sigterm_mid_run(proc, silent_model)
    assert rc == 0, err
    assert "pong" not in out
    assert recorded_runs(tmp_path) == [("killed", "shutdown")]
    assert pending_inputs(tmp_path) == ["ping"]  # handled again at the next start, not lost

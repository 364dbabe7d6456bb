"""``hub run`` with ``[extensions.matrix]`` as a real process against the fake homeserver and
the fake OpenAI server: killed mid-run (SIGKILL) and started again, nothing is lost and
nothing answered twice; an event whose run kills the process every time is parked after
``dead_letter_after`` starts, and its room goes on."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from matrix_harness import reply

from hub.testing import FakeOpenAI
from hub.testing.matrix import BOT, FakeMatrix
from hub_matrix import TOKEN_KEY

ROOT = Path(__file__).resolve().parents[3]


def _config(tmp_path: Path, hs: FakeMatrix, model_url: str, extra: str = "") -> Path:
    (tmp_path / "contexts").mkdir(exist_ok=True)
    config = tmp_path / "config.toml"
    config.write_text(
        f"""
[hub]
data_dir = "data"
contexts_dir = "contexts"
shutdown_grace = 1
{extra}
[model]
provider = "openai"
base_url = "{model_url}"
api_key = "x"
name = "hub"
max_retries = 0

[memory]
episodes = false

[extensions.matrix]
homeserver = "{hs.base_url}"
user_id = "{BOT}"
access_token = "${{MATRIX_ACCESS_TOKEN}}"
sync_timeout = 5
""",
        encoding="utf-8",
    )
    return config


def _start_hub(tmp_path: Path, config: Path, token: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MATRIX_ACCESS_TOKEN": token}
    with (tmp_path / "hub.log").open("ab") as log_file:  # the child keeps its own copy
        return subprocess.Popen(
            [sys.executable, "-m", "hub.cli", "run", "--config", str(config)],
            cwd=tmp_path,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )


async def _exited(proc: subprocess.Popen[bytes], timeout: float = 20) -> int:
    async with asyncio.timeout(timeout):
        while proc.poll() is None:
            await asyncio.sleep(0.02)
    return proc.returncode


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(5)


def _answered(hs: FakeMatrix) -> list[str]:
    return sorted(s["room_id"] for s in hs.sent if s["type"] == "m.room.message")


async def test_sigkill_mid_run_then_restart_loses_and_repeats_nothing(tmp_path: Path) -> None:
    model = FakeOpenAI(default=reply("answered"), latency=1.0, chunk=8, record=False)
    await model.start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        async with FakeMatrix() as hs:
            users = [f"@u{i}:example.org" for i in range(6)]
            rooms = [hs.create_room([u]) for u in users]
            token = hs.token()
            config = _config(tmp_path, hs, model.url)
            procs.append(_start_hub(tmp_path, config, token))
            await hs.wait_for(lambda: len(hs.state.syncs) >= 2, timeout=30)  # past the first sync
            hs.push_text(rooms[1], users[1], "answered before the crash")
            await hs.wait_sent(1, timeout=15)
            hs.push_text(rooms[2], users[2], "in flight 1")
            hs.push_text(rooms[3], users[3], "in flight 2")
            # both recorded and their runs waiting on the slow model: kill the process now
            async with asyncio.timeout(10):
                while len(model.stats) < 3:
                    await asyncio.sleep(0.01)
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait(5)
            assert _answered(hs) == [rooms[1]]

            # what the kept sync token passed over had been recorded first
            db = sqlite3.connect(tmp_path / "data" / "hub.db")
            recorded = {r[0] for r in db.execute("SELECT platform_id FROM inbox")}
            (kept,) = db.execute("SELECT value FROM kv WHERE key = ?", (TOKEN_KEY + BOT,)).fetchone()
            db.close()
            position = int(json.loads(kept)[1:])
            for p, _room, event in hs.state.stream:
                if p <= position and event["sender"] != BOT and event["type"] == "m.room.message":
                    assert f"matrix:{event['event_id']}" in recorded

            hs.push_text(rooms[4], users[4], "sent while the hub was down")
            procs.append(_start_hub(tmp_path, config, token))
            await hs.wait_for(lambda: set(_answered(hs)) >= {rooms[1], rooms[2], rooms[3], rooms[4]}, timeout=20)
            hs.push_text(rooms[5], users[5], "a last one")  # everything before it is done by now
            await hs.wait_for(lambda: rooms[5] in _answered(hs), timeout=15)
            procs[1].send_signal(signal.SIGTERM)
            assert await _exited(procs[1]) == 0
            log = (tmp_path / "hub.log").read_text()
            assert _answered(hs) == sorted(rooms[1:]), f"{_answered(hs)}\n{log[-3000:]}"
    finally:
        _stop(procs)
        await model.stop()


BOMB = """
import os
from pydantic import BaseModel
from hub import Extension, action

class Nothing(BaseModel):
    pass

@action(name="detonate", description="Only for the test.")
async def detonate(args: Nothing, ctx) -> dict:
    os._exit(3)  # the process dies in the middle of the run, as a crash would

extension = Extension(name="bomb", actions=[detonate])
"""


def _answer(body: dict[str, Any]) -> str:
    prompt = json.dumps(body["messages"])
    if "POISON" in prompt:
        return '<response><action_call name="detonate">{}</action_call></response>'
    return reply("answered")


async def test_an_event_whose_run_kills_every_start_is_parked_and_the_room_goes_on(tmp_path: Path) -> None:
    (tmp_path / "bomb.py").write_text(BOMB)
    procs: list[subprocess.Popen[bytes]] = []
    async with FakeOpenAI(default=_answer) as model, FakeMatrix() as hs:
        room = hs.create_room(["@ann:example.org"])
        token = hs.token()
        config = _config(tmp_path, hs, model.url, 'dead_letter_after = 2\n[extensions.bomb]\nmodule = "bomb"\n')
        try:
            procs.append(_start_hub(tmp_path, config, token))
            await hs.wait_for(lambda: len(hs.state.syncs) >= 2, timeout=30)
            poison = hs.push_text(room, "@ann:example.org", "POISON")
            assert await _exited(procs[-1]) == 3  # its run dies with the process
            procs.append(_start_hub(tmp_path, config, token))
            assert await _exited(procs[-1]) == 3  # resumed at the start: dies again
            procs.append(_start_hub(tmp_path, config, token))  # parked now: the room goes on
            syncs = len(hs.state.syncs)
            await hs.wait_for(lambda: len(hs.state.syncs) > syncs, timeout=30)
            hs.push_text(room, "@ann:example.org", "hello again")
            await hs.wait_sent(1, timeout=15)
            assert hs.texts(room) == ["answered"]
            procs[-1].send_signal(signal.SIGTERM)
            assert await _exited(procs[-1]) == 0
        finally:
            _stop(procs)
        assert all("POISON" not in json.dumps(b["messages"]) for b in model.bodies[-1:])

    db = sqlite3.connect(tmp_path / "data" / "hub.db")
    rows = db.execute("SELECT platform_id, context FROM inbox WHERE state = 'parked'").fetchall()
    db.close()
    assert rows == [(f"matrix:{poison['event_id']}", f"matrix:room:{room}")]

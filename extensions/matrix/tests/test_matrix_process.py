"""``hub run`` with ``[extensions.matrix]`` as a real process against the fake homeserver and
the fake OpenAI server: killed mid-run (SIGKILL) and started again, nothing is lost and
nothing answered twice; an event whose run kills the process every time is parked after
``dead_letter_after`` starts, and its room goes on."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

from matrix_harness import reply

from hub.testing import FakeOpenAI
from hub.testing.matrix import BOT, FakeMatrix
from hub.testing.processes import start_hub, stop_hub, store_rows, until, until_exited, write_hub_config
from hub_matrix import TOKEN_KEY


def _config(tmp_path: Path, hs: FakeMatrix, model_url: str, extra: str = "") -> Path:
    return write_hub_config(
        tmp_path,
        model_url=model_url,
        hub=extra,
        extension=f"""
[extensions.matrix]
homeserver = "{hs.base_url}"
user_id = "{BOT}"
access_token = "${{MATRIX_ACCESS_TOKEN}}"
sync_timeout = 5
""",
    )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            stop_hub(p)


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
            procs.append(start_hub(tmp_path, config, {"MATRIX_ACCESS_TOKEN": token}))
            await hs.wait_for(lambda: len(hs.state.syncs) >= 2, timeout=30)  # past the first sync
            hs.push_text(rooms[1], users[1], "answered before the crash")
            await hs.wait_sent(1, timeout=15)
            hs.push_text(rooms[2], users[2], "in flight 1")
            hs.push_text(rooms[3], users[3], "in flight 2")
            # both recorded and their runs waiting on the slow model: kill the process now
            await until(lambda: len(model.stats) >= 3, procs[0], timeout=10)
            output = stop_hub(procs[0])
            assert _answered(hs) == [rooms[1]], output

            # what the kept sync token passed over had been recorded first
            recorded = {r[0] for r in store_rows(tmp_path, "SELECT platform_id FROM inbox")}
            ((kept,),) = store_rows(tmp_path, "SELECT value FROM kv WHERE key = ?", TOKEN_KEY + BOT)
            position = int(json.loads(kept)[1:])
            for p, _room, event in hs.state.stream:
                if p <= position and event["sender"] != BOT and event["type"] == "m.room.message":
                    assert f"matrix:{event['event_id']}" in recorded

            hs.push_text(rooms[4], users[4], "sent while the hub was down")
            procs.append(start_hub(tmp_path, config, {"MATRIX_ACCESS_TOKEN": token}))
            await hs.wait_for(lambda: set(_answered(hs)) >= {rooms[1], rooms[2], rooms[3], rooms[4]}, timeout=20)
            hs.push_text(rooms[5], users[5], "a last one")  # everything before it is done by now
            await hs.wait_for(lambda: rooms[5] in _answered(hs), timeout=15)
            procs[1].send_signal(signal.SIGTERM)
            log = await until_exited(procs[1])
            assert procs[1].returncode == 0, log
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
            procs.append(start_hub(tmp_path, config, {"MATRIX_ACCESS_TOKEN": token}))
            await hs.wait_for(lambda: len(hs.state.syncs) >= 2, timeout=30)
            poison = hs.push_text(room, "@ann:example.org", "POISON")
            output = await until_exited(procs[-1])
            assert procs[-1].returncode == 3, output  # its run dies with the process
            procs.append(start_hub(tmp_path, config, {"MATRIX_ACCESS_TOKEN": token}))
            output = await until_exited(procs[-1])
            assert procs[-1].returncode == 3, output  # resumed at the start: dies again
            procs.append(start_hub(tmp_path, config, {"MATRIX_ACCESS_TOKEN": token}))  # parked now: the room goes on
            syncs = len(hs.state.syncs)
            await hs.wait_for(lambda: len(hs.state.syncs) > syncs, timeout=30)
            hs.push_text(room, "@ann:example.org", "hello again")
            await hs.wait_sent(1, timeout=15)
            assert hs.texts(room) == ["answered"]
            procs[-1].send_signal(signal.SIGTERM)
            output = await until_exited(procs[-1])
            assert procs[-1].returncode == 0, output
        finally:
            _stop(procs)
        assert all("POISON" not in json.dumps(b["messages"]) for b in model.bodies[-1:])

    rows = store_rows(tmp_path, "SELECT platform_id, context FROM inbox WHERE state = 'parked'")
    assert rows == [(f"matrix:{poison['event_id']}", f"matrix:room:{room}")]

"""busy across a SIGKILL: the hub dies while one message is being answered and three more
wait in the queue; after the restart each of the four is answered once, in the order they
were sent: in a run of its own each (queue), or together (collect)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hub import HubConfig, RunState, ScriptedModel
from tests._support.processes import kill_when_ready

_QUEUED_HUB = """
import asyncio, sys
from pathlib import Path
from hub_cli import CliSettings, extension as cli
from hub import Hub, HubConfig
from hub.models import Model

data = Path(sys.argv[1])

class Hanging(Model):
    name = "hanging"
    entered = asyncio.Event()
    async def stream(self, request):
        self.entered.set()
        await asyncio.Event().wait()
        yield ""

async def main() -> None:
    cfg = HubConfig()
    cfg.hub.data_dir = str(data)
    cfg.hub.contexts_dir = str(data.parent / "contexts")
    cfg.memory.episodes = False
    cfg.agent.busy = sys.argv[2]
    model = Hanging()
    hub = Hub(cfg, model=model, load_extensions=False, extensions=[cli(CliSettings(stdin=False))])
    async with hub:
        await hub.submit("cli:session", {"user": "ann"}, "m1", user="ann")
        await model.entered.wait()
        for text in ("m2", "m3", "m4"):
            await hub.submit("cli:session", {"user": "ann"}, text, user="ann")
        while len(await hub.inbox.pending()) < 4:
            await asyncio.sleep(0.01)
        (data / "ready").write_text("one in flight, three queued")
        await asyncio.Event().wait()  # until the SIGKILL

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("mode", "groups"),
    [
        ("queue", [["m1"], ["m2"], ["m3"], ["m4"], ["m5"]]),
        ("collect", [["m1", "m2", "m3", "m4"], ["m5"]]),
    ],
)
async def test_a_queue_of_three_survives_a_sigkill_each_answered_once_in_order(
    make_hub: Any, config: HubConfig, out: Any, mode: str, groups: list[list[str]]
) -> None:
    config.data_dir.mkdir(parents=True, exist_ok=True)
    await kill_when_ready(_QUEUED_HUB, str(config.data_dir), mode, ready=config.data_dir / "ready")
    config.agent.busy = mode
    model = ScriptedModel([], default="<response><output>ok</output></response>")
    async with make_hub(model) as hub:
        async with asyncio.timeout(10):  # the resumed inputs are taken (the model is asked) before m5 is sent
            while not model.requests:
                await asyncio.sleep(0.01)
        sentinel = await hub.send("cli:session", {"user": "ann"}, "m5", user="ann")  # in turn, after the others
        runs = sorted(await hub.runs.list(context="cli:session:ann"), key=lambda r: r.started)
        taken = [[e.content for e in await hub.runs.events(r.id) if e.kind == "input"] for r in runs]
        assert await hub.inbox.pending() == []
    assert sentinel.ok
    killed = [r for r in runs if r.state == RunState.KILLED]
    assert [r.reason for r in killed] == ["abnormal_exit"]
    answered = [t for r, t in zip(runs, taken, strict=True) if r.state == RunState.COMPLETED]
    assert answered == groups  # each once, in order
    assert out.getvalue() == "ok\n" * len(groups) and len(model.requests) == len(groups)

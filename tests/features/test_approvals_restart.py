"""A crash while a run waits for approval: the question survives the SIGKILL, and after the
restart it is handled exactly once: answered meanwhile (the action runs once), or denied
once its time has passed (the model is told, the action never runs)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from hub import Extension, Hub, HubConfig, RunState, ScriptedModel, action
from hub.store import ApprovalState
from tests._support.processes import kill_when_ready

CALL = '<response><action_call name="delete">{"path": "/tmp/x"}</action_call></response>'
DONE = "<response><output>done</output></response>"

_WAITING_HUB = """
import asyncio, sys
from pathlib import Path
from pydantic import BaseModel
from hub_cli import CliSettings, extension as cli
from hub import Extension, Hub, HubConfig, ScriptedModel, action

data, ran_file = Path(sys.argv[1]), Path(sys.argv[2])

class PathArgs(BaseModel):
    path: str

@action(name="delete", description="Delete a file.", confirm=True)
async def delete(args: PathArgs, ctx) -> dict:
    with ran_file.open("a") as f:
        f.write(args.path + "\\n")
    return {"deleted": args.path}

async def main() -> None:
    cfg = HubConfig()
    cfg.hub.data_dir = str(data)
    cfg.hub.contexts_dir = str(data.parent / "contexts")
    cfg.memory.episodes = False
    model = ScriptedModel([sys.argv[3], sys.argv[4]])
    hub = Hub(cfg, model=model, load_extensions=False, extensions=[cli(CliSettings(stdin=False)), Extension("t", actions=[delete])])
    async with hub:
        hub.approvals.poll = 0.01
        asyncio.get_running_loop().create_task(hub.send("cli:session", {"user": "ann"}, "delete /tmp/x"))
        while not await hub.approvals.waiting():
            await asyncio.sleep(0.01)
        (data / "ready").write_text("waiting for a yes")
        await asyncio.Event().wait()  # until the SIGKILL

asyncio.run(main())
"""


class PathArgs(BaseModel):
    path: str


def tools(ran_file: Path) -> Extension:
    @action(name="delete", description="Delete a file.", confirm=True)
    async def delete(args: PathArgs, ctx: Any) -> dict[str, Any]:
        with ran_file.open("a") as f:
            f.write(args.path + "\n")
        return {"deleted": args.path}

    return Extension("t", actions=[delete])


async def crash_while_waiting(config: HubConfig, ran_file: Path) -> None:
    config.data_dir.mkdir(parents=True, exist_ok=True)
    await kill_when_ready(
        _WAITING_HUB, str(config.data_dir), str(ran_file), CALL, DONE, ready=config.data_dir / "ready"
    )
    assert not ran_file.exists()


async def resumed_run_ended(hub: Hub) -> Any:
    """The run that took over ann's input after the restart, once it ended."""
    for _ in range(2000):
        ended = [
            r
            for r in await hub.runs.list(context="cli:session:ann")
            if r.state != RunState.RUNNING and r.reason != "abnormal_exit"
        ]
        if ended:
            return ended[0]
        await asyncio.sleep(0.01)
    raise AssertionError("the resumed run did not end")


async def test_a_question_answered_after_the_crash_runs_the_action_once(
    make_hub: Any, config: HubConfig, tmp_path: Path
) -> None:
    ran_file = tmp_path / "ran.txt"
    await crash_while_waiting(config, ran_file)
    model = ScriptedModel([CALL, DONE])
    hub = make_hub(model, tools(ran_file))
    async with hub:
        hub.approvals.poll = 0.01
        (question,) = await hub.approvals.waiting()  # the question the dead process asked
        assert (await hub.approvals.answer_as_operator(question.id, approve=True)).accepted
        run = await resumed_run_ended(hub)
        row = await hub.approvals.store.get(question.id)
        assert [a.id for a in await hub.approvals.store.list()] == [question.id]  # asked once, not again
    assert run.state == RunState.COMPLETED
    assert row is not None and row.state == ApprovalState.DONE and row.run_id == run.id
    assert ran_file.read_text() == "/tmp/x\n"


async def test_a_question_whose_time_passed_while_down_is_denied_once(
    make_hub: Any, config: HubConfig, tmp_path: Path
) -> None:
    ran_file = tmp_path / "ran.txt"
    await crash_while_waiting(config, ran_file)
    model = ScriptedModel([CALL, DONE])
    hub = make_hub(model, tools(ran_file))
    hub.approvals.clock = lambda: time.time() + 601  # the hub was down past the timeout
    async with hub:
        run = await resumed_run_ended(hub)
        (row,) = await hub.approvals.store.list()
        events = await hub.runs.events(run.id)
    assert row.state == ApprovalState.EXPIRED and not ran_file.exists()
    denied = [e for e in events if e.kind == "action_result"]
    assert len(denied) == 1 and denied[0].denied and "within 600s" in denied[0].error
    assert run.state == RunState.COMPLETED and len(model.requests) == 2

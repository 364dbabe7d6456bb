"""``hub trace --follow`` and ``hub runs --follow``: another process prints events as they arrive."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import BaseModel

from hub import Extension, HubConfig, ScriptedModel, action
from tests._support.processes import spawn_hub

CLI = ("cli:session", {"user": "ann"})


class Nothing(BaseModel):
    pass


def gated() -> tuple[Extension, asyncio.Event]:
    gate = asyncio.Event()

    @action(name="wait", description="Waits for the test.")
    async def wait(args: Nothing, ctx) -> str:
        await gate.wait()
        return "done waiting"

    return Extension(name="gate", actions=[wait]), gate


MODEL = [
    '<response><action_call name="wait">{}</action_call></response>',
    "<response><output>finished \x1b[31mred</output></response>",
]


async def spawn(tmp_path: Path, config: HubConfig, *args: str) -> asyncio.subprocess.Process:
    (tmp_path / "config.toml").write_text(f'[hub]\ndata_dir = "{config.data_dir}"\n', encoding="utf-8")
    return await spawn_hub(*args, cwd=tmp_path, stdin=None)


async def line_with(proc: asyncio.subprocess.Process, text: str, seen: list[str]) -> str:
    while True:
        raw = await asyncio.wait_for(proc.stdout.readline(), 30)
        if not raw:
            err = await proc.stderr.read()
            raise AssertionError(f"no line with {text!r}; got {seen}; stderr {err.decode()}")
        line = raw.decode().rstrip("\n")
        seen.append(line)
        if text in line:
            return line


async def test_trace_follow_prints_a_run_as_it_goes_until_it_ends(make_hub, config, tmp_path: Path) -> None:
    ext, gate = gated()
    async with make_hub(ScriptedModel(MODEL), ext) as hub:
        started = hub.events(kinds=["action_call"])
        task = asyncio.create_task(hub.send(*CLI, "go \x1b]0;title\x07", user="ann"))
        call = await asyncio.wait_for(started.__anext__(), 10)
        started.close()
        proc = await spawn(tmp_path, config, "trace", "--follow", call.run_id[:12])
        seen: list[str] = []
        await line_with(proc, "call #0 wait", seen)  # printed while the run still waits
        assert not task.done()
        gate.set()
        result = await task
        await line_with(proc, "ended    completed", seen)
        assert await asyncio.wait_for(proc.wait(), 30) == 0  # it stops when the run ends
    text = "\n".join(seen)
    assert seen[0].startswith(f"run {result.run_id}")
    for what in ("input", "result   wait ok", "output   [cli:message] sent", "state    completed"):
        assert what in text
    assert "\x1b" not in text and "\\x1b[31mred" in text and "\\x1b]0;title\\x07" in text


async def test_runs_follow_prints_every_new_run_and_raw_keeps_control_characters(
    make_hub, config, tmp_path: Path
) -> None:
    proc = await spawn(tmp_path, config, "runs", "--follow", "--raw")
    try:
        async with make_hub(
            ["<response><output>one \x1b[1m</output></response>", "<response><output>two</output></response>"]
        ) as hub:
            seen: list[str] = []
            await line_with(proc, "following runs", seen)
            first = await hub.send(*CLI, "1", user="ann")
            await line_with(proc, f"{first.run_id[:10]}  ended    completed", seen)
            second = await hub.send(*CLI, "2", user="ann")
            await line_with(proc, f"{second.run_id[:10]}  ended    completed", seen)
    finally:
        proc.terminate()
        await proc.wait()
    text = "\n".join(seen)
    assert f"{first.run_id[:10]}  started  cli:session:ann by ann" in text
    assert "one \x1b[1m" in text  # --raw: as it is
    kinds = [line.split()[2] for line in seen[1:] if line.split()[1] == second.run_id[:10]]
    assert kinds == ["started", "input", "output", "step", "state", "ended"]


async def test_follow_names_a_run_that_does_not_exist(make_hub, config, tmp_path: Path) -> None:
    async with make_hub(["<response><output>x</output></response>"]) as hub:
        await hub.send(*CLI, "1", user="ann")
    proc = await spawn(tmp_path, config, "trace", "--follow", "zzzz")
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2 and "no run matches 'zzzz'" in err.decode()

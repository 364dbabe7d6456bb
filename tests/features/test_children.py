"""Child runs: a parent awaits its child's result; an orphaned child is killed; the trace is a tree."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from hub import Extension, Hub, HubConfig, NoArgs, RunState, action
from hub.cli import render_trace
from hub.features import ORPHANED
from hub.models import ModelRequest
from hub.store import collect_tree
from tests._support.chat import Said, test_extension

_NEW_RESULT = re.compile(r'<action_result name="(\w+)" status="(\w+)" new="true">(.*?)</action_result>', re.S)
_NEW_INPUT = re.compile(r'<input type="[\w:]+"(?: user="[^"]*")? new="true">(.*?)</input>', re.S)


def brain(request: ModelRequest) -> str:
    """A model driven by a small language in its input.

    ``spawn CTX TEXT`` starts a child and waits; ``spawn-nowait CTX TEXT`` does not wait;
    ``spawn-then-wait CTX TEXT`` starts without waiting, then waits with waitRun; ``block``
    calls an action that never returns. Anything else is echoed as ``done: TEXT``. A new
    action result is reported as ``NAME STATUS: BODY``.
    """
    text = request.messages[-1]["content"]
    run = text[text.rindex("<current_run>") :]
    if m := _NEW_RESULT.search(run):
        results = _NEW_RESULT.findall(run)
        return "<response>" + "".join(f"<output>{n} {s}: {b}</output>" for n, s, b in results) + "</response>"
    m = _NEW_INPUT.search(run)
    content = m.group(1) if m else ""
    cmd, _, rest = content.partition(" ")
    ctx, _, sub = rest.partition(" ")
    if cmd in ("spawn", "spawn-nowait"):
        args = {"context": ctx, "input": sub, "wait": cmd == "spawn"}
        return f'<response><action_call name="startRun">{json.dumps(args)}</action_call></response>'
    if cmd == "spawn-then-wait":
        args = {"context": ctx, "input": sub, "wait": False}
        return (
            f'<response><action_call name="startRun">{json.dumps(args)}</action_call>'
            '<action_call name="waitRun">{"run_id": "{{calls[0].run_id}}"}</action_call></response>'
        )
    if cmd == "block":
        return '<response><action_call name="block">{}</action_call></response>'
    return f"<response><output>done: {content}</output></response>"


def blocking_extension(started: asyncio.Event, cancelled: asyncio.Event) -> Extension:
    @action(name="block", description="Never returns.")
    async def block(args: NoArgs, ctx: object) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    return Extension(name="blocking", actions=[block])


@pytest.fixture
def persona(config: HubConfig) -> Path:
    path = config.contexts_dir / "default.toml"
    path.write_text('name = "Boss"\ninstructions = "Delegate."\nchild_runs = ["test:chat:*"]\n')
    return path


async def wait_state(hub: Hub, run_id: str, timeout: float = 5.0) -> RunState:
    async def until_ended() -> RunState:
        while True:
            run = await hub.runs.get(run_id)
            if run is not None and run.state != RunState.RUNNING:
                return run.state
            await asyncio.sleep(0.01)

    return await asyncio.wait_for(until_ended(), timeout)


async def test_a_parent_awaits_its_childs_result(persona: Path, make_chat_hub, said: Said) -> None:
    async with make_chat_hub(brain) as hub:
        result = await hub.send("test:chat:boss", data="spawn test:chat:worker summarise the news")
        assert result is not None and result.ok, result
        children = await hub.runs.list(parent_id=result.run_id)
        assert len(children) == 1
        child = children[0]
        assert (child.context, child.state, child.parent_id) == ("test:chat:worker", "completed", result.run_id)
        assert said.items[0] == ("test:chat:worker", "done: summarise the news")
        context, text = said.items[1]
        assert context == "test:chat:boss" and text.startswith("startRun ok: ")
        seen = json.loads(text.removeprefix("startRun ok: "))
        assert seen == {
            "run_id": child.id,
            "context": "test:chat:worker",
            "state": "completed",
            "reason": None,
            "outputs": [{"type": "test:say", "content": "done: summarise the news"}],
        }
        first = (await hub.runs.events(child.id))[0]
        assert first.kind == "input" and first.type == "child"
        assert first.meta["parent_run"] == result.run_id


async def test_start_without_waiting_then_wait_run(persona: Path, make_chat_hub, said: Said) -> None:
    async with make_chat_hub(brain) as hub:
        result = await hub.send("test:chat:boss", data="spawn-then-wait test:chat:worker hello")
        assert result is not None and result.ok
        outputs = [o.content for o in result.outputs]
        assert outputs[0].startswith("startRun ok: ") and '"state": "running"' in outputs[0]
        assert outputs[1].startswith("waitRun ok: ") and '"state": "completed"' in outputs[1]
        assert "done: hello" in outputs[1]


async def test_an_orphaned_child_is_killed(persona: Path, make_chat_hub, said: Said) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()
    async with make_chat_hub(brain, extra=[blocking_extension(started, cancelled)]) as hub:
        result = await hub.send("test:chat:boss", data="spawn-nowait test:chat:worker block")
        assert result is not None and result.ok
        (child,) = await hub.runs.list(parent_id=result.run_id)
        assert await wait_state(hub, child.id) == RunState.KILLED
        child = await hub.runs.get(child.id)
        assert child.reason == ORPHANED
        assert hub.runner.running == 0
        if started.is_set():  # the child got as far as its action: it was cancelled, not left behind
            await asyncio.wait_for(cancelled.wait(), 1)


async def test_a_child_whose_parent_already_ended_is_killed_when_it_starts(persona: Path, make_chat_hub) -> None:
    async with make_chat_hub(brain) as hub:
        done = await hub.send("test:chat:boss", data="hello")
        sub = await hub.submit("test:chat:late", data="hello", type="child", parent_id=done.run_id)
        result = await sub.wait()
        assert (result.state, result.reason) == (RunState.KILLED, ORPHANED)
        assert (await hub.runs.get(result.run_id)).parent_id == done.run_id


async def test_the_trace_shows_the_tree(persona: Path, make_chat_hub) -> None:
    async with make_chat_hub(brain) as hub:
        result = await hub.send("test:chat:boss", data="spawn test:chat:worker spawn test:chat:intern hi")
        assert result is not None and result.ok
        tree = await collect_tree(hub.runs, result.run_id)
        root = await hub.runs.get(result.run_id)
        text = render_trace(root, await hub.runs.events(root.id), tree=tree)
    (worker,) = tree[root.id]
    (intern,) = tree[worker.id]
    assert intern.context == "test:chat:intern"
    lines = text.splitlines()
    i = lines.index("child runs:")
    assert lines[i + 1].startswith(f"└── run {worker.id[:10]} test:chat:worker completed")
    assert lines[i + 2].startswith(f"    └── run {intern.id[:10]} test:chat:intern completed")


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ("other:chat:1", "unknown context"),
        ("test:chat:boss", "would wait on itself"),
    ],
)
async def test_bad_targets_are_errors_the_model_sees(persona: Path, make_chat_hub, target: str, error: str) -> None:
    async with make_chat_hub(brain) as hub:
        result = await hub.send("test:chat:boss", data=f"spawn {target} hi")
        assert result is not None and result.ok
        assert "startRun error: " in result.outputs[0].content and error in result.outputs[0].content
        assert await hub.runs.list(parent_id=result.run_id) == []


async def test_a_target_outside_the_personas_allow_list_is_refused(config: HubConfig, make_chat_hub) -> None:
    (config.contexts_dir / "default.toml").write_text(
        'name = "Boss"\ninstructions = "x"\nchild_runs = ["test:chat:worker*"]\n'
    )
    async with make_chat_hub(brain) as hub:
        ok = await hub.send("test:chat:boss", data="spawn test:chat:worker-1 hi")
        assert "startRun ok" in ok.outputs[-1].content
        refused = await hub.send("test:chat:boss", data="spawn test:chat:admin hi")
        assert "is not a context this persona may start runs in" in refused.outputs[0].content


async def test_the_actions_are_not_offered_without_child_runs_in_the_persona(make_chat_hub) -> None:
    hub = make_chat_hub(brain)
    async with hub:
        result = await hub.send("test:chat:boss", data="spawn test:chat:worker hi")
    assert "startRun" not in hub.model.requests[0].system  # type: ignore[attr-defined]
    assert "unknown action 'startRun'" in str(result.logs)


def test_hub_trace_prints_the_tree(tmp_path: Path, said: Said, capsys: pytest.CaptureFixture[str]) -> None:
    from hub import ScriptedModel, load_config
    from hub.cli import main

    (tmp_path / "contexts").mkdir()
    (tmp_path / "contexts" / "default.toml").write_text(
        'name = "B"\ninstructions = "x"\nchild_runs = ["test:chat:*"]\n'
    )
    path = tmp_path / "config.toml"
    path.write_text('[hub]\ndata_dir = "data"\ncontexts_dir = "contexts"\n')

    async def scenario() -> str:
        hub = Hub(
            load_config(path), model=ScriptedModel(brain), load_extensions=False, extensions=[test_extension(said)]
        )
        async with hub:
            result = await hub.send("test:chat:boss", data="spawn test:chat:worker spawn test:chat:intern hi")
        assert result is not None and result.ok
        return result.run_id

    run_id = asyncio.run(scenario())
    assert main(["trace", run_id[:12], "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "child runs:" in out
    assert re.search(r"^└── run \w+ test:chat:worker completed", out, re.M)
    assert re.search(r"^    └── run \w+ test:chat:intern completed", out, re.M)
    assert main(["trace", run_id, "--json", "--config", str(path)]) == 0
    data = json.loads(capsys.readouterr().out)
    (worker,) = data["children"]
    assert worker["context"] == "test:chat:worker" and worker["parent_id"] == run_id
    assert [c["context"] for c in worker["children"]] == ["test:chat:intern"]


async def test_a_parent_waiting_on_a_long_child_is_not_stalled(config) -> None:
    """The parent's heartbeat goes on while it waits for a child that takes longer than it."""
    import asyncio

    from hub import Context, Extension, ScriptedModel

    config.agent.heartbeat_timeout = 0.6
    config.memory.episodes = False  # loading the embedder for recall would outlast this heartbeat
    slow = {"n": 0}

    def respond(request):
        content = request.messages[0]["content"]
        if 'type="child"' in content:
            return "child done"
        if "startRun" in request.system and "status=" not in content:
            return '<response><action_call name="startRun">{"context": "test:worker:1", "input": "work"}</action_call></response>'
        return "parent done"

    class Slow(ScriptedModel):
        async def stream(self, request):
            if 'type="child"' in request.messages[0]["content"]:
                slow["n"] += 1
                for _ in range(8):  # 1.2 s of steady progress in the child
                    await asyncio.sleep(0.15)
                    yield ""
            async for c in super().stream(request):
                yield c

    said = []
    from hub import output

    @output(type="test:say")
    async def say(content: str, ctx) -> None:
        said.append(content)

    boss = Context(type="test:boss", reply_output="test:say", persona="boss")
    worker = Context(type="test:worker", reply_output="test:say")
    config.contexts_dir.mkdir(exist_ok=True)
    (config.contexts_dir / "boss.toml").write_text(
        'name = "Boss"\ninstructions = "Delegate."\nchild_runs = ["test:worker:*"]\n'
    )
    from hub import Hub

    config.contexts_dir.mkdir(exist_ok=True)
    hub = Hub(
        config,
        model=Slow(respond),
        load_extensions=False,
        extensions=[Extension("t", contexts=[boss, worker], outputs=[say])],
    )
    async with hub:
        result = await hub.send("test:boss:1", data="do it")
    assert slow["n"] == 1, [str(e)[:300] for e in result.logs]
    assert result.state == "completed", result.reason
    assert said == ["child done", "parent done"]

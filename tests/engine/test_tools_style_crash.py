"""The SIGKILL guarantee under ``prompt_style = "tools"``: a real process killed while it
sends a reply (after a tool call) does not send it again when the next one starts."""

from __future__ import annotations

import asyncio

from hub import Context, Extension, RunState, ScriptedModel, output
from hub.models import ToolCallDelta
from tests._support.processes import kill_when_ready

_CRASHING_HUB = """
import asyncio, sys
from pathlib import Path
from hub import Context, Extension, Hub, HubConfig, ScriptedModel, action, output
from hub.models import ToolCallDelta

data, sent_file = Path(sys.argv[1]), Path(sys.argv[2])

@action(name="lookup")
async def lookup(args, ctx) -> str:
    with sent_file.open("a") as f:
        f.write("lookup ran\\n")
    return "the answer is three parts"

@output(type="t:long")
async def long(content: str, ctx) -> None:
    for i, part in enumerate(content.split("|")):
        if i == 1:
            (data / "ready").write_text("part 2 is next")
            await asyncio.Event().wait()  # hangs here until the SIGKILL
        with sent_file.open("a") as f:
            f.write(part + "\\n")
        await ctx.part_sent(i)

async def main() -> None:
    cfg = HubConfig()
    cfg.hub.data_dir = str(data)
    cfg.hub.contexts_dir = str(data.parent / "contexts")
    cfg.memory.episodes = False
    cfg.model.prompt_style = "tools"
    model = ScriptedModel([[ToolCallDelta(0, "call_1", "lookup", "{}")], "one|two|three"])
    chat = Context(type="t:chat", reply_output="t:long")
    hub = Hub(cfg, model=model, load_extensions=False, extensions=[Extension("t", contexts=[chat], outputs=[long], actions=[lookup])])
    async with hub:
        await hub.send("t:chat", {"id": "ann"}, "tell me")

asyncio.run(main())
"""


async def test_a_crash_mid_reply_after_a_tool_call_does_not_send_it_again(config, tmp_path) -> None:
    sent_file = tmp_path / "sent.txt"
    config.data_dir.mkdir(parents=True, exist_ok=True)
    await kill_when_ready(_CRASHING_HUB, str(config.data_dir), str(sent_file), ready=config.data_dir / "ready")
    assert sent_file.read_text() == "lookup ran\none\n"

    @output(type="t:long")
    async def long(content: str, ctx) -> None:
        with sent_file.open("a") as f:
            f.write(content + "\n")

    config.model.prompt_style = "tools"
    chat = Context(type="t:chat", reply_output="t:long")
    model = ScriptedModel([], default="sentinel answer")
    from hub import Hub

    hub = Hub(config, model=model, load_extensions=False, extensions=[Extension("t", contexts=[chat], outputs=[long])])
    async with hub:
        killed = await hub.runs.list(state=str(RunState.KILLED))
        result = await hub.send("t:chat", {"id": "bob"}, "sentinel")
        assert await hub.inbox.pending() == []
    assert [r.reason for r in killed] == ["abnormal_exit"]
    assert result.state == RunState.COMPLETED
    # Ann's input was not answered again, nor her tool called again: only the sentinel's answer came
    assert sent_file.read_text() == "lookup ran\none\nsentinel answer\n"
    assert len(model.requests) == 1


def test_a_tool_turn_scripted_for_the_model_streams_its_pieces() -> None:
    """ScriptedModel streams a tool turn's pieces as they are (the unit tests' model)."""
    turn = [ToolCallDelta(0, "c", "f", '{"a":'), ToolCallDelta(0, arguments=" 1}")]

    async def pieces() -> list:
        from hub.models import ModelRequest

        return [p async for p in ScriptedModel([turn]).stream(ModelRequest(system="", messages=[]))]

    *calls, usage = asyncio.run(pieces())
    assert calls == turn and usage.finish_reason == "tool_calls"

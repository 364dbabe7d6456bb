"""examples/mcp-notes: the hub starts the example's MCP server (the mcp SDK, over stdio) and
its tools answer Telegram messages: a note saved in one message is found in the next."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from hub import Hub, RunState, ScriptedModel
from hub.testing.telegram import FakeTelegram
from tests.examples._examples import example_config

pytest.importorskip("mcp")


def call(tool: str, args: dict[str, str]) -> str:
    return f'<response><action_call name="notes__{tool}">{json.dumps(args)}</action_call></response>'


def say(text: str) -> str:
    return f'<response><output type="telegram:send">{text}</output></response>'


async def test_the_mcp_servers_tools_save_and_find_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `python` in the config is the Python that has the mcp SDK: this one, as in the reader's venv
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    notes = tmp_path / "notes.json"
    model = ScriptedModel(
        [
            call("add_note", {"text": "The door code is 4711"}),
            say("Saved."),
            call("search_notes", {"query": "door code"}),
            say("The door code is 4711."),
        ]
    )
    async with FakeTelegram() as tg:
        cfg = example_config(
            "mcp-notes",
            tmp_path,
            env={"NOTES_FILE": str(notes)},
            extensions={"telegram": {"base_url": f"{tg.base_url}/bot"}},
        )
        async with Hub(cfg, model=model) as hub, hub.events(kinds=["run_ended"]) as ended:
            runs = []
            for text in ("Remember: the door code is 4711", "What is the door code?"):
                tg.push_message(chat_id=7, text=text)
                runs.append(await anext(aiter(ended)))
            events = [await hub.runs.events(r.run_id) for r in runs]
            await tg.wait_sent(2, timeout=30)
    assert [r.state for r in runs] == [RunState.COMPLETED.value] * 2
    # the server wrote the note where [mcp.notes] env told it to
    assert json.loads(notes.read_text()) == ["The door code is 4711"]
    (saved,) = [e for e in events[0] if e.kind == "action_result"]
    (found,) = [e for e in events[1] if e.kind == "action_result"]
    assert saved.ok and found.ok and "The door code is 4711" in json.dumps(found.data)
    # the tool's answer is what the model read before it answered
    assert "The door code is 4711" in str(model.requests[3])
    assert [m["text"] for m in tg.sent] == ["Saved.", "The door code is 4711."]

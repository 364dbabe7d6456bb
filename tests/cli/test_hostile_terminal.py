"""The operator's terminal: piped lines of any length into ``hub chat``, and user text with
escape sequences shown by ``hub trace`` and ``hub runs`` (real processes)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from hub import Hub, ScriptedModel
from hub.testing import FakeOpenAI, temp_config
from hub_cli import read_lines
from tests._support.chat import Said, reply_to_input, test_extension
from tests._support.processes import hub_cmd, setup_dir

EVIL = "hi \x1b]0;pwned\x07\x1b[2K\r\u009b2Jgone"


async def test_read_lines_takes_a_line_over_1_mib_and_the_lines_after_it() -> None:
    r, w = os.pipe()
    long = "é" * 1_500_000  # 3 MB of UTF-8, split across reads inside its characters
    data = f"first\n{long}\nafter\nno newline at the end".encode()

    def feed() -> None:
        os.write(w, data)
        os.close(w)

    with os.fdopen(r, "rb", buffering=0) as stream:
        task = asyncio.create_task(asyncio.to_thread(feed))
        lines = [line async for line in read_lines(stream)]  # type: ignore[arg-type]
        await task
    assert lines == ["first\n", long + "\n", "after\n", "no newline at the end"]


async def test_chat_survives_a_piped_line_over_1_mib(tmp_path: Path) -> None:
    async with FakeOpenAI(default="ok") as fake:
        setup_dir(tmp_path, fake.url)
        stdin = "x" * (1 << 20) + "y\n" + "after the long line\n"
        code, out, err = await hub_cmd("chat", cwd=tmp_path, stdin=stdin, env={"TEST_KEY": "sk-test"})
    assert code == 0, err[-2000:]
    assert "Separator is found" not in err and "Traceback" not in err
    assert "ok" in out  # the line after it is answered
    code, out, _ = await hub_cmd("runs", "--json", cwd=tmp_path)
    assert len(out.splitlines()) == 2
    assert any("after the long line" in b["messages"][-1]["content"] for b in fake.bodies)


async def make_runs(tmp_path: Path) -> str:
    cfg = temp_config(tmp_path)
    said = Said()
    async with Hub(
        cfg, model=ScriptedModel(reply_to_input), load_extensions=False, extensions=[test_extension(said)]
    ) as hub:
        result = await hub.send("test:chat:\x1b[31mred", data=EVIL)
    assert result is not None and result.ok
    (tmp_path / "config.toml").write_text(f'[hub]\ndata_dir = "{tmp_path / "data"}"\n')
    return result.run_id


async def test_trace_and_runs_escape_control_characters_unless_raw(tmp_path: Path) -> None:
    run_id = await make_runs(tmp_path)
    code, out, err = await hub_cmd("trace", run_id, cwd=tmp_path)
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out and "\u009b" not in out
    assert "hi \\x1b]0;pwned\\x07\\x1b[2K\\x0d\\x9b2Jgone" in out
    code, out, err = await hub_cmd("runs", cwd=tmp_path)
    assert code == 0 and "\x1b" not in out and "test:chat:\\x1b[31mred" in out
    code, raw, _ = await hub_cmd("trace", run_id, "--raw", cwd=tmp_path)
    assert EVIL in raw
    code, raw, _ = await hub_cmd("runs", "--raw", cwd=tmp_path)
    assert "test:chat:\x1b[31mred" in raw
    code, out, _ = await hub_cmd("trace", run_id, "--json", cwd=tmp_path)  # JSON escapes them itself
    assert "\x1b" not in out and json.loads(out)["events"][0]["content"] == EVIL

"""Replies in the terminal: printed as the model writes them to a terminal, whole lines to a pipe."""

from __future__ import annotations

import io
from pathlib import Path

from hub import Hub, ScriptedModel
from hub.testing import temp_config
from hub_cli import CliSettings, extension


class Terminal(io.StringIO):
    """What a terminal received, write by write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.writes.append(s)
        return super().write(s)


WORDS = " ".join(f"word{i}" for i in range(80))
REPLY = f"<response><output>{WORDS}</output></response>"


async def test_a_terminal_sees_the_reply_as_it_is_written(tmp_path: Path) -> None:
    term = Terminal()
    model = ScriptedModel([REPLY], chunk=9, chunk_delay=0.002)
    ext = extension(CliSettings(stdin=False, prefix="bot> "), out=term)
    async with Hub(temp_config(tmp_path), model=model, load_extensions=False, extensions=[ext]) as hub:
        result = await hub.send("cli:session", {"user": "ann"}, "hi", user="ann")
    assert result.ok
    assert term.getvalue() == f"bot> {WORDS}\n"
    pieces = [w for w in term.writes if w.strip()]
    assert len(pieces) > 3, "printed in pieces as it arrived"


async def test_a_pipe_gets_whole_lines(tmp_path: Path) -> None:
    pipe = io.StringIO()
    model = ScriptedModel([REPLY], chunk=9)
    ext = extension(CliSettings(stdin=False), out=pipe)
    async with Hub(temp_config(tmp_path), model=model, load_extensions=False, extensions=[ext]) as hub:
        await hub.send("cli:session", {"user": "ann"}, "hi", user="ann")
    assert pipe.getvalue() == f"{WORDS}\n"
    assert not any(o.live for o in ext.outputs)

"""The Signal quick start (README.md and docs/platforms/signal.md), followed as written: the
shipped ``config.toml`` with the section's TOML, the variable its ``export`` line sets, and
the fake it starts (``python -m hub.testing.signal``, a real process) answering a typed
message through the hub.

What the test changes is what ``hub.testing.quickstart.quickstart_config`` says, the port
(a free one, not 8080, which may be taken) and the model (scripted).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hub import Hub, ScriptedModel
from hub.config import config_from_dict
from hub.testing import quickstart as qs
from hub.testing.processes import SOURCE_ROOT, free_port
from hub.testing.signal import USER

SOURCES = {
    "README.md": r"Quick start: Signal",
    "docs/platforms/signal.md": r"Quick start \(against the fake, no Signal number\)",
}


def section(source: str) -> str:
    return qs.doc_section(source, SOURCES[source])


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_quick_start_toml_validates_with_the_variable_it_exports(source: str) -> None:
    text = section(source)
    raw = qs.shipped_config(text)
    table = raw["extensions"]["signal"]
    assert table["enabled"] is True
    env = qs.exports(text)
    var = qs.variable_of(table["number"])
    assert var in env, "number comes from an exported variable"
    config_from_dict(raw, path=SOURCE_ROOT / "config.toml", env=env)
    # the fake it starts listens where url points, for the number exported
    command = qs.command_line(text, "hub.testing.signal")
    assert command[command.index("--port") + 1] == table["url"].rsplit(":", 1)[1]
    assert command[command.index("--number") + 1] == env[var]
    # the two copies say the same
    assert qs.toml_of(text) == qs.toml_of(section("README.md")) and env == qs.exports(section("README.md"))


async def test_the_quick_start_answers_a_message_typed_into_the_fake(tmp_path: Path) -> None:
    text = section("docs/platforms/signal.md")
    port = free_port()
    command = qs.command_line(text, "hub.testing.signal")
    command[command.index("--port") + 1] = str(port)
    assert command[:3] == [".venv/bin/python", "-m", "hub.testing.signal"]
    fake = await qs.start_program(command)
    assert fake.stdin is not None and fake.stdout is not None
    try:
        async with asyncio.timeout(60):
            started = (await fake.stdout.readline()).decode()
            assert f"on http://127.0.0.1:{port} for +15550001111" in started, started
            cfg = qs.quickstart_config(
                text, tmp_path / "data", {"extensions": {"signal": {"url": f"http://127.0.0.1:{port}"}}}
            )
            model = ScriptedModel(['<response><output type="signal:message">Hello from the hub!</output></response>'])
            async with Hub(cfg, model=model):
                lines: list[str] = []
                while True:  # typed until a websocket takes it (the hub connects as it starts)
                    fake.stdin.write(b"hello\n")
                    await fake.stdin.drain()
                    line = (await fake.stdout.readline()).decode()
                    lines.append(line)
                    if "delivered to 1 websocket" in line:
                        break
                    await asyncio.sleep(0.1)
                while not any("bot -> " in ln for ln in lines):
                    lines.append((await fake.stdout.readline()).decode())
    finally:
        await qs.end_program(fake)
    assert any(ln.strip() == f"bot -> {USER}: Hello from the hub!" for ln in lines), lines

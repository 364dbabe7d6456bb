"""The Signal quick start (README.md and docs/platforms/signal.md), followed as written: the
shipped ``config.toml`` with the section's TOML, the variable its ``export`` line sets, and
the fake it starts (``python -m hub.testing.signal``, a real process) answering a typed
message through the hub.

What the test changes, and only that: the port (a free one, not 8080, which may be taken),
the data folder (a temporary directory), episodic memory off (Chroma takes seconds to
start), the terminal off (the test has no terminal) and the model (scripted, where the
reader exports OPENAI_API_KEY).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from hub import Hub, ScriptedModel
from hub.config import config_from_dict
from hub.testing.signal import USER

ROOT = Path(__file__).resolve().parents[3]
SOURCES = {
    "README.md": r"^## Quick start: Signal\n(.*?)^## ",
    "docs/platforms/signal.md": r"^## Quick start \(against the fake, no Signal number\)\n(.*?)^## ",
}


def section(source: str) -> str:
    match = re.search(SOURCES[source], (ROOT / source).read_text(), re.S | re.M)
    assert match, f"{source} has no Signal quick start section"
    return match.group(1)


def toml_of(text: str) -> dict[str, Any]:
    (block,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    return tomllib.loads(re.sub(r"^ +", "", block, flags=re.M))


def exports(text: str) -> dict[str, str]:
    return dict(re.findall(r'^\s*export (\w+)="([^"]*)"', text, re.M))


def fake_command(text: str) -> list[str]:
    (line,) = [ln.strip() for ln in text.splitlines() if "-m hub.testing.signal" in ln]
    return line.split()


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_quick_start_toml_validates_with_the_variable_it_exports(source: str) -> None:
    text = section(source)
    raw = merged(tomllib.loads((ROOT / "config.toml").read_text()), toml_of(text))
    table = raw["extensions"]["signal"]
    assert table["enabled"] is True
    env = exports(text)
    var = re.fullmatch(r"\$\{(\w+)\}", table["number"])
    assert var and var.group(1) in env, "number comes from an exported variable"
    config_from_dict(raw, path=ROOT / "config.toml", env=env)
    # the fake it starts listens where url points, for the number exported
    command = fake_command(text)
    assert command[command.index("--port") + 1] == table["url"].rsplit(":", 1)[1]
    assert command[command.index("--number") + 1] == env[var.group(1)]
    # the two copies say the same
    assert toml_of(text) == toml_of(section("README.md")) and env == exports(section("README.md"))


async def test_the_quick_start_answers_a_message_typed_into_the_fake(tmp_path: Path) -> None:
    text = section("docs/platforms/signal.md")
    port = free_port()
    command = fake_command(text)
    command[command.index("--port") + 1] = str(port)
    assert command[:3] == [".venv/bin/python", "-m", "hub.testing.signal"]
    fake = await asyncio.create_subprocess_exec(
        sys.executable,
        *command[1:],
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert fake.stdin is not None and fake.stdout is not None
    try:
        async with asyncio.timeout(60):
            started = (await fake.stdout.readline()).decode()
            assert f"on http://127.0.0.1:{port} for +15550001111" in started, started
            raw = merged(tomllib.loads((ROOT / "config.toml").read_text()), toml_of(text))
            raw = merged(
                raw,
                {
                    "hub": {"data_dir": str(tmp_path / "data"), "contexts_dir": str(ROOT / "contexts")},
                    "memory": {"episodes": False},
                    "extensions": {"cli": {"enabled": False}, "signal": {"url": f"http://127.0.0.1:{port}"}},
                },
            )
            cfg = config_from_dict(raw, path=tmp_path / "config.toml", env=exports(text))
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
        if fake.returncode is None:
            fake.kill()
        await fake.wait()
    assert any(ln.strip() == f"bot -> {USER}: Hello from the hub!" for ln in lines), lines

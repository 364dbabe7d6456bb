"""The WhatsApp quick start (README.md and docs/platforms/whatsapp.md), followed as written:
the shipped ``config.toml`` with the section's TOML, the variables its ``export`` lines set,
and the fake it starts (``python -m hub.testing.whatsapp``, a real process) answering a
typed message through the hub.

What the test changes, and only that: the ports (free ones, not 8080 and 8090, which may be
taken), the data folder (a temporary directory), episodic memory off (Chroma takes seconds
to start), the terminal off (the test has no terminal) and the model (scripted, where the
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

ROOT = Path(__file__).resolve().parents[3]
SOURCES = {
    "README.md": r"^## Quick start: WhatsApp\n(.*?)^## ",
    "docs/platforms/whatsapp.md": r"^## Quick start \(against the fake, no Meta account\)\n(.*?)^## ",
}


def section(source: str) -> str:
    match = re.search(SOURCES[source], (ROOT / source).read_text(), re.S | re.M)
    assert match, f"{source} has no WhatsApp quick start section"
    return match.group(1)


def toml_of(text: str) -> dict[str, Any]:
    (block,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    return tomllib.loads(re.sub(r"^ +", "", block, flags=re.M))


def exports(text: str) -> dict[str, str]:
    return dict(re.findall(r'^\s*export (\w+)="([^"]*)"', text, re.M))


def fake_command(text: str) -> list[str]:
    (line,) = [ln.strip() for ln in text.splitlines() if "-m hub.testing.whatsapp" in ln]
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
def test_the_quick_start_toml_validates_with_the_variables_it_exports(source: str) -> None:
    text = section(source)
    raw = merged(tomllib.loads((ROOT / "config.toml").read_text()), toml_of(text))
    table = raw["extensions"]["whatsapp"]
    assert table["enabled"] is True and raw["http"]["port"] == 8080
    env = exports(text)
    for key in ("phone_number_id", "token", "app_secret", "verify_token"):
        var = re.fullmatch(r"\$\{(\w+)\}", table[key])
        assert var and var.group(1) in env, f"{key} comes from an exported variable"
    cfg = config_from_dict(raw, path=ROOT / "config.toml", env=env)
    assert cfg.http is not None and cfg.http.port == 8080
    # the fake it starts listens where base_url points, and posts where the hub listens
    command = fake_command(text)
    assert command[command.index("--port") + 1] == table["base_url"].rsplit(":", 1)[1]
    assert command[command.index("--webhook") + 1] == f"http://127.0.0.1:8080{table['webhook_path']}"
    # the two copies say the same
    assert toml_of(text) == toml_of(section("README.md")) and env == exports(section("README.md"))


async def test_the_quick_start_answers_a_message_typed_into_the_fake(tmp_path: Path) -> None:
    text = section("docs/platforms/whatsapp.md")
    http_port, fake_port = free_port(), free_port()
    command = fake_command(text)
    command[command.index("--port") + 1] = str(fake_port)
    command[command.index("--webhook") + 1] = f"http://127.0.0.1:{http_port}/whatsapp"
    assert command[:3] == [".venv/bin/python", "-m", "hub.testing.whatsapp"]
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
            assert f"fake Graph API on http://127.0.0.1:{fake_port}" in started, started
            raw = merged(tomllib.loads((ROOT / "config.toml").read_text()), toml_of(text))
            raw = merged(
                raw,
                {
                    "hub": {"data_dir": str(tmp_path / "data"), "contexts_dir": str(ROOT / "contexts")},
                    "memory": {"episodes": False},
                    "http": {"port": http_port},
                    "extensions": {
                        "cli": {"enabled": False},
                        "whatsapp": {"base_url": f"http://127.0.0.1:{fake_port}"},
                    },
                },
            )
            cfg = config_from_dict(raw, path=tmp_path / "config.toml", env=exports(text))
            model = ScriptedModel(['<response><output type="whatsapp:message">Hello from the hub!</output></response>'])
            async with Hub(cfg, model=model):
                fake.stdin.write(b"hello\n")
                await fake.stdin.drain()
                lines = []
                while not any("bot -> " in ln for ln in lines):
                    lines.append((await fake.stdout.readline()).decode())
    finally:
        if fake.returncode is None:
            fake.kill()
        await fake.wait()
    assert any("delivered: (200" in ln for ln in lines), lines
    assert any(ln.strip() == "bot -> 15550001111: Hello from the hub!" for ln in lines), lines

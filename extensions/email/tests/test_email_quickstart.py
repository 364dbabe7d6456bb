"""The email quick start (README.md and docs/platforms/email.md), followed as written: the
shipped ``config.toml`` with the section's TOML, the variable its ``export`` line sets, and
the servers it starts (``python -m hub.testing.email``, a real process running Dovecot and
an SMTP server) answering a typed line through the hub.

What the test changes, and only that: the ports (free ones, not 1143 and 1025, which may be
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
from hub.testing.email import DOVECOT

ROOT = Path(__file__).resolve().parents[3]
SOURCES = {
    "README.md": r"^## Quick start: email\n(.*?)^## ",
    "docs/platforms/email.md": r"^## Quick start \(against local servers, no mail account\)\n(.*?)^## ",
}


def section(source: str) -> str:
    match = re.search(SOURCES[source], (ROOT / source).read_text(), re.S | re.M)
    assert match, f"{source} has no email quick start section"
    return match.group(1)


def toml_of(text: str) -> dict[str, Any]:
    (block,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    return tomllib.loads(re.sub(r"^ +", "", block, flags=re.M))


def exports(text: str) -> dict[str, str]:
    return dict(re.findall(r'^\s*export (\w+)="([^"]*)"', text, re.M))


def servers_command(text: str) -> list[str]:
    (line,) = [ln.strip() for ln in text.splitlines() if "-m hub.testing.email" in ln]
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
    table = raw["extensions"]["email"]
    assert table["enabled"] is True
    env = exports(text)
    var = re.fullmatch(r"\$\{(\w+)\}", table["password"])
    assert var and var.group(1) in env, "the password comes from an exported variable"
    config_from_dict(raw, path=ROOT / "config.toml", env=env)
    # the servers it starts listen where the table points
    command = servers_command(text)
    assert int(command[command.index("--imap-port") + 1]) == table["imap_port"]
    assert int(command[command.index("--smtp-port") + 1]) == table["smtp_port"]
    # the two copies say the same
    assert toml_of(text) == toml_of(section("README.md")) and env == exports(section("README.md"))


@pytest.mark.skipif(not Path(DOVECOT).exists(), reason="Dovecot is not installed (.ci/run installs it)")
async def test_the_quick_start_answers_a_line_typed_into_the_servers(tmp_path: Path) -> None:
    text = section("docs/platforms/email.md")
    imap_port, smtp_port = free_port(), free_port()
    command = servers_command(text)
    command[command.index("--imap-port") + 1] = str(imap_port)
    command[command.index("--smtp-port") + 1] = str(smtp_port)
    assert command[:3] == [".venv/bin/python", "-m", "hub.testing.email"]
    servers = await asyncio.create_subprocess_exec(
        sys.executable,
        *command[1:],
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert servers.stdin is not None and servers.stdout is not None
    try:
        async with asyncio.timeout(60):
            started = (await servers.stdout.readline()).decode()
            assert f"IMAP (Dovecot) on 127.0.0.1:{imap_port}, SMTP on 127.0.0.1:{smtp_port}" in started, started
            raw = merged(tomllib.loads((ROOT / "config.toml").read_text()), toml_of(text))
            raw = merged(
                raw,
                {
                    "hub": {"data_dir": str(tmp_path / "data"), "contexts_dir": str(ROOT / "contexts")},
                    "memory": {"episodes": False},
                    "extensions": {
                        "cli": {"enabled": False},
                        "email": {"imap_port": imap_port, "smtp_port": smtp_port},
                    },
                },
            )
            cfg = config_from_dict(raw, path=tmp_path / "config.toml", env=exports(text))
            model = ScriptedModel(['<response><output type="email:reply">Hello from the hub!</output></response>'])
            async with Hub(cfg, model=model):
                servers.stdin.write(b"hello\n")
                await servers.stdin.drain()
                lines: list[str] = []
                while not any("bot -> " in ln for ln in lines):
                    lines.append((await servers.stdout.readline()).decode())
    finally:
        if servers.returncode is None:
            servers.terminate()  # Dovecot is stopped and its folder removed
            try:
                async with asyncio.timeout(10):
                    await servers.wait()
            except TimeoutError:
                servers.kill()
                await servers.wait()
    assert any(ln.startswith("delivered: UID 1") for ln in lines), lines
    assert any(ln.strip() == "bot -> alice@example.com: [Re: Hello] Hello from the hub!" for ln in lines), lines

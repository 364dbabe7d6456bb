"""The WhatsApp quick start (README.md and docs/platforms/whatsapp.md), followed as written:
the shipped ``config.toml`` with the section's TOML, the variables its ``export`` lines set,
and the fake it starts (``python -m hub.testing.whatsapp``, a real process) answering a
typed message through the hub.

What the test changes is what ``hub.testing.quickstart.quickstart_config`` says, the ports
(free ones, not 8080 and 8090, which may be taken) and the model (scripted).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hub import Hub, ScriptedModel
from hub.config import config_from_dict
from hub.testing import quickstart as qs
from hub.testing.processes import SOURCE_ROOT, free_port

SOURCES = {
    "README.md": r"Quick start: WhatsApp",
    "docs/platforms/whatsapp.md": r"Quick start \(against the fake, no Meta account\)",
}


def section(source: str) -> str:
    return qs.doc_section(source, SOURCES[source])


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_quick_start_toml_validates_with_the_variables_it_exports(source: str) -> None:
    text = section(source)
    raw = qs.shipped_config(text)
    table = raw["extensions"]["whatsapp"]
    assert table["enabled"] is True and raw["http"]["port"] == 8080
    env = qs.exports(text)
    for key in ("phone_number_id", "token", "app_secret", "verify_token"):
        assert qs.variable_of(table[key]) in env, f"{key} comes from an exported variable"
    cfg = config_from_dict(raw, path=SOURCE_ROOT / "config.toml", env=env)
    assert cfg.http is not None and cfg.http.port == 8080
    # the fake it starts listens where base_url points, and posts where the hub listens
    command = qs.command_line(text, "hub.testing.whatsapp")
    assert command[command.index("--port") + 1] == table["base_url"].rsplit(":", 1)[1]
    assert command[command.index("--webhook") + 1] == f"http://127.0.0.1:8080{table['webhook_path']}"
    # the two copies say the same
    assert qs.toml_of(text) == qs.toml_of(section("README.md")) and env == qs.exports(section("README.md"))


async def test_the_quick_start_answers_a_message_typed_into_the_fake(tmp_path: Path) -> None:
    text = section("docs/platforms/whatsapp.md")
    http_port, fake_port = free_port(), free_port()
    command = qs.command_line(text, "hub.testing.whatsapp")
    command[command.index("--port") + 1] = str(fake_port)
    command[command.index("--webhook") + 1] = f"http://127.0.0.1:{http_port}/whatsapp"
    assert command[:3] == [".venv/bin/python", "-m", "hub.testing.whatsapp"]
    fake = await qs.start_program(command)
    assert fake.stdin is not None and fake.stdout is not None
    try:
        async with asyncio.timeout(60):
            started = (await fake.stdout.readline()).decode()
            assert f"fake Graph API on http://127.0.0.1:{fake_port}" in started, started
            changes = {
                "http": {"port": http_port},
                "extensions": {"whatsapp": {"base_url": f"http://127.0.0.1:{fake_port}"}},
            }
            cfg = qs.quickstart_config(text, tmp_path / "data", changes)
            model = ScriptedModel(['<response><output type="whatsapp:message">Hello from the hub!</output></response>'])
            async with Hub(cfg, model=model):
                fake.stdin.write(b"hello\n")
                await fake.stdin.drain()
                lines = []
                while not any("bot -> " in ln for ln in lines):
                    lines.append((await fake.stdout.readline()).decode())
    finally:
        await qs.end_program(fake)
    assert any("delivered: (200" in ln for ln in lines), lines
    assert any(ln.strip() == "bot -> 15550001111: Hello from the hub!" for ln in lines), lines

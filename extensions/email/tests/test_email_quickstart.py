"""The email quick start (README.md and docs/platforms/email.md), followed as written: the
shipped ``config.toml`` with the section's TOML, the variable its ``export`` line sets, and
the servers it starts (``python -m hub.testing.email``, a real process running Dovecot and
an SMTP server) answering a typed line through the hub.

What the test changes is what ``hub.testing.quickstart.quickstart_config`` says, the ports
(free ones, not 1143 and 1025, which may be taken) and the model (scripted).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hub import Hub, ScriptedModel
from hub.config import config_from_dict
from hub.testing import quickstart as qs
from hub.testing.email import DOVECOT
from hub.testing.processes import SOURCE_ROOT, free_port

SOURCES = {
    "README.md": r"Quick start: email",
    "docs/platforms/email.md": r"Quick start \(against local servers, no mail account\)",
}


def section(source: str) -> str:
    return qs.doc_section(source, SOURCES[source])


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_the_quick_start_toml_validates_with_the_variables_it_exports(source: str) -> None:
    text = section(source)
    raw = qs.shipped_config(text)
    table = raw["extensions"]["email"]
    assert table["enabled"] is True
    env = qs.exports(text)
    assert qs.variable_of(table["password"]) in env, "the password comes from an exported variable"
    config_from_dict(raw, path=SOURCE_ROOT / "config.toml", env=env)
    # the servers it starts listen where the table points
    command = qs.command_line(text, "hub.testing.email")
    assert int(command[command.index("--imap-port") + 1]) == table["imap_port"]
    assert int(command[command.index("--smtp-port") + 1]) == table["smtp_port"]
    # the two copies say the same
    assert qs.toml_of(text) == qs.toml_of(section("README.md")) and env == qs.exports(section("README.md"))


@pytest.mark.skipif(not Path(DOVECOT).exists(), reason="Dovecot is not installed (.ci/run installs it)")
async def test_the_quick_start_answers_a_line_typed_into_the_servers(tmp_path: Path) -> None:
    text = section("docs/platforms/email.md")
    imap_port, smtp_port = free_port(), free_port()
    command = qs.command_line(text, "hub.testing.email")
    command[command.index("--imap-port") + 1] = str(imap_port)
    command[command.index("--smtp-port") + 1] = str(smtp_port)
    assert command[:3] == [".venv/bin/python", "-m", "hub.testing.email"]
    servers = await qs.start_program(command)
    assert servers.stdin is not None and servers.stdout is not None
    try:
        async with asyncio.timeout(60):
            started = (await servers.stdout.readline()).decode()
            assert f"IMAP (Dovecot) on 127.0.0.1:{imap_port}, SMTP on 127.0.0.1:{smtp_port}" in started, started
            changes = {"extensions": {"email": {"imap_port": imap_port, "smtp_port": smtp_port}}}
            cfg = qs.quickstart_config(text, tmp_path / "data", changes)
            model = ScriptedModel(['<response><output type="email:reply">Hello from the hub!</output></response>'])
            async with Hub(cfg, model=model):
                servers.stdin.write(b"hello\n")
                await servers.stdin.drain()
                lines: list[str] = []
                while not any("bot -> " in ln for ln in lines):
                    lines.append((await servers.stdout.readline()).decode())
    finally:
        await qs.end_program(servers, terminate=True)  # Dovecot is stopped and its folder removed
    assert any(ln.startswith("delivered: UID 1") for ln in lines), lines
    assert any(ln.strip() == "bot -> alice@example.com: [Re: Hello] Hello from the hub!" for ln in lines), lines

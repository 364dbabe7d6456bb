"""A hub under test with the terminal extension: its printed output, its scripted model, and
a default persona (``make_rig`` in ``tests/conftest.py`` builds one)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hub import Extension, Hub, HubConfig, ScriptedModel
from hub_cli import CliSettings
from hub_cli import extension as cli_extension

DEFAULT_PERSONA = 'name = "Hub"\ninstructions = "You are terse."\n'


@dataclass
class Rig:
    """A hub under test with its terminal output and model."""

    hub: Hub
    model: ScriptedModel
    out: io.StringIO
    config: HubConfig
    contexts: Path

    async def say(self, text: str, *, user: str = "ann") -> Any:
        return await self.hub.send("cli:session", {"user": user}, text, user=user)


def make_rig(
    config: HubConfig,
    responses: Sequence[Any] = (),
    *,
    extensions: Sequence[Extension] = (),
    default: str | None = "<response><output>ok</output></response>",
    **model_kw: Any,
) -> Rig:
    """A rig on ``config``; its persona folder gets :data:`DEFAULT_PERSONA` unless a test wrote one."""
    persona = config.contexts_dir / "default.toml"
    if not persona.exists():
        persona.parent.mkdir(parents=True, exist_ok=True)
        persona.write_text(DEFAULT_PERSONA, encoding="utf-8")
    out = io.StringIO()
    model = ScriptedModel(list(responses), default=default, **model_kw)
    hub = Hub(
        config,
        model=model,
        load_extensions=False,
        extensions=[cli_extension(CliSettings(stdin=False), out=out), *extensions],
    )
    hub.personas.interval = 0  # tests edit files and expect the very next message to see it
    return Rig(hub, model, out, config, config.contexts_dir)

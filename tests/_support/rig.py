"""Hubs for the operator-feature tests: a scripted model, the terminal extension, tmp data."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

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


@pytest.fixture
def config(tmp_path: Path) -> HubConfig:
    cfg = HubConfig()
    cfg.hub.data_dir = str(tmp_path / "data")
    cfg.hub.contexts_dir = str(tmp_path / "contexts")
    cfg.memory.episodes = False  # episodic memory (Chroma) is not what these tests are about
    (tmp_path / "contexts").mkdir()
    (tmp_path / "contexts" / "default.toml").write_text(DEFAULT_PERSONA, encoding="utf-8")
    return cfg


@pytest.fixture
def make_rig(config: HubConfig) -> Callable[..., Rig]:
    def make(
        responses: Sequence[Any] = (),
        *,
        extensions: Sequence[Extension] = (),
        default: str | None = "<response><output>ok</output></response>",
        **model_kw: Any,
    ) -> Rig:
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

    return make

"""Fixtures every folder of the core's tests uses: a config on a temp data dir, and hubs with
the terminal extension built on the scripted model (``make_hub``, or ``make_rig`` for a
:class:`~tests._support.rig.Rig` with a default persona)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hub import Extension, Hub, HubConfig, ScriptedModel
from hub.testing import temp_config
from hub.testing.fixtures import _no_network, _restore_logging  # noqa: F401  (autouse)
from hub_cli import CliSettings
from hub_cli import extension as cli_extension
from tests._support import rig


@pytest.fixture
def config(tmp_path: Path) -> HubConfig:
    """A config on ``tmp_path`` (``hub.testing.temp_config``): data and persona folders there, no episodes."""
    return temp_config(tmp_path)


@pytest.fixture
def out() -> io.StringIO:
    """What the cli:message output printed."""
    return io.StringIO()


@pytest.fixture
def make_hub(config: HubConfig, out: io.StringIO) -> Callable[..., Hub]:
    """``make_hub(responses_or_model, *extensions)``: a hub with the cli extension."""

    def make(model: Any = (), *extensions: Extension, cfg: HubConfig | None = None, **kw: Any) -> Hub:
        if not hasattr(model, "stream"):
            model = ScriptedModel(list(model))
        cli = cli_extension(CliSettings(stdin=False), out=out)
        return Hub(cfg or config, model=model, load_extensions=False, extensions=[cli, *extensions], **kw)

    return make


@pytest.fixture
def make_rig(config: HubConfig) -> Callable[..., rig.Rig]:
    """``make_rig(responses, extensions=..., default=...)``: a :class:`~tests._support.rig.Rig` on ``config``."""

    def make(*args: Any, **kw: Any) -> rig.Rig:
        return rig.make_rig(config, *args, **kw)

    return make

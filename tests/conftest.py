"""Shared fixtures: a config on a temp data dir, and hubs built on the scripted model."""

from __future__ import annotations

import io
import logging
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from extensions.cli import CliSettings
from extensions.cli import extension as cli_extension
from hub import Extension, Hub, HubConfig, ScriptedModel


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests talk to 127.0.0.1 only: any other address fails loudly."""
    real = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and self.family in (socket.AF_INET, socket.AF_INET6):
            if host not in ("127.0.0.1", "::1", "localhost") and not host.startswith("127."):
                raise OSError(f"test tried to reach the network: {address!r}")
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture(autouse=True)
def _restore_logging():
    """Tests that set up logging must not leave handlers on streams that pytest closes."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    for h in handlers:
        if h not in root.handlers:
            root.addHandler(h)
    root.setLevel(level)


@pytest.fixture
def config(tmp_path: Path) -> HubConfig:
    cfg = HubConfig()
    cfg.hub.data_dir = str(tmp_path / "data")
    cfg.hub.contexts_dir = str(tmp_path / "contexts")
    (tmp_path / "contexts").mkdir()
    cfg.memory.episodes = False
    return cfg


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

"""A started hub with the Matrix extension against the fake homeserver, for the tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from hub import Extension, Hub, HubConfig, RunResult, ScriptedModel
from hub.engine import Plugin
from hub.models import Model
from hub.testing import temp_config
from hub.testing.matrix import BOT, FakeMatrix
from hub_matrix import MatrixSettings, extension

ANN = "@ann:example.org"
BOB = "@bob:example.org"


def reply(text: str) -> str:
    return f'<response><output type="matrix:message">{text}</output></response>'


class _Recorder(Plugin):
    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    async def after_run(self, result: Any, run: Any) -> None:
        self.harness.results.append(result)
        self.harness.changed.set()


class Harness:
    """A started hub with the Matrix extension, and the run results it produced."""

    def __init__(self, hub: Hub, model: Any, hs: FakeMatrix) -> None:
        self.hub = hub
        self.model = model
        self.hs = hs
        self.results: list[RunResult] = []
        self.changed = asyncio.Event()

    async def wait_results(self, n: int, timeout: float = 10) -> list[RunResult]:
        async with asyncio.timeout(timeout):
            while len(self.results) < n:
                self.changed.clear()
                await self.changed.wait()
        return self.results

    async def wait_inputs(self, n: int, timeout: float = 10) -> list[Any]:
        """Until runs that ended took ``n`` inputs in all (a run may take several of a room)."""
        async with asyncio.timeout(timeout):
            while len(self.inputs()) < n:
                self.changed.clear()
                await self.changed.wait()
        return self.inputs()

    async def synced(self, timeout: float = 10) -> None:
        """Until the bot has synced past everything pushed so far."""
        await self.hs.wait_for(lambda: f"s{self.hs.state.position}" in self.hs.state.syncs, timeout)

    def inputs(self) -> list[Any]:
        return [e for r in self.results for e in r.logs if getattr(e, "kind", "") == "input"]


@contextlib.asynccontextmanager
async def running(
    tmp_path: Path,
    hs: FakeMatrix,
    responses: list[Any] | None = None,
    *,
    default: str | None = "ok",
    model: Model | None = None,
    config: HubConfig | None = None,
    extensions: Sequence[Extension] = (),
    inbox: Any = None,
    **settings: Any,
) -> AsyncIterator[Harness]:
    """A started hub with the Matrix extension against ``hs`` (logged in with an access token
    unless ``settings`` say otherwise), answered by ``model`` (default: a ScriptedModel),
    its inputs recorded in ``inbox`` (default: the config's)."""
    cfg = config or temp_config(tmp_path)
    cfg.hub.shutdown_grace = 2
    model = model or ScriptedModel(responses or [], default=default)
    if "password" not in settings:
        settings.setdefault("access_token", hs.token())
    settings.setdefault("sync_timeout", 5)
    settings.setdefault("room_rate", (50, 1.0))  # pacing is the governor's, tested with the core
    settings.setdefault("global_rate", (50, 1.0))
    ext = extension(MatrixSettings(homeserver=hs.base_url, user_id=BOT, **settings))
    hub = Hub(cfg, model=model, load_extensions=False, extensions=[ext, *extensions], inbox=inbox)
    harness = Harness(hub, model, hs)
    hub.plugins.add(_Recorder(harness))
    async with hub:
        await harness.synced()  # the first sync: what came before it is not answered
        yield harness

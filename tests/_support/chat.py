"""Shared pieces for the trigger tests: a fake clock, a recording test context, hub builders."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from hub import Context, Extension, Hub, HubConfig, ScriptedModel, output
from hub.models import ModelRequest


class FakeClock:
    """A wall clock that moves only when told; ``sleep`` waits for it.

    ``advance`` moves time forward sleeper by sleeper, and after waking each one waits until
    the scheduler is asleep again, so a test sees every fire in order.
    """

    def __init__(self, now: float) -> None:
        self.now = now
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._asleep = asyncio.Event()

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._seq), fut))
        self._asleep.set()
        await fut

    async def asleep(self, timeout: float = 5.0) -> None:
        """Wait until something sleeps on this clock (the scheduler finished its pass)."""
        await asyncio.wait_for(self._asleep.wait(), timeout)

    async def advance(self, seconds: float) -> None:
        target = self.now + seconds
        await self.asleep()
        while self._sleepers and self._sleepers[0][0] <= target:
            at, _, fut = heapq.heappop(self._sleepers)
            self.now = max(self.now, at)
            self._asleep.clear()
            fut.set_result(None)
            await self.asleep()
        self.now = target


class Said:
    """What the test context's output received, by context instance."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        self._changed = asyncio.Condition()

    async def add(self, context: str, text: str) -> None:
        async with self._changed:
            self.items.append((context, text))
            self._changed.notify_all()

    async def wait_for(self, n: int, timeout: float = 5.0) -> list[tuple[str, str]]:
        async def until() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.items) >= n)

        await asyncio.wait_for(until(), timeout)
        return list(self.items)


def test_extension(said: Said) -> Extension:
    chat = Context(type="test:chat", reply_output="test:say", description="A test conversation.")

    @output(type="test:say", description="Say something in the test chat.")
    async def say(content: str, ctx: Any) -> None:
        await said.add(ctx.context.id, content)

    return Extension(name="test", contexts=[chat], outputs=[say])


test_extension.__test__ = False  # type: ignore[attr-defined]


def reply_to_input(request: ModelRequest) -> str:
    """A model that echoes the newest input's text as a reply."""
    text = request.messages[-1]["content"]
    marker = text.rfind("<input ")
    body = text[text.index(">", marker) + 1 : text.index("</input>", marker)] if marker >= 0 else "?"
    return f"<response><output>echo: {body}</output></response>"


@pytest.fixture
def said() -> Said:
    return Said()


@pytest.fixture
def config(tmp_path: Path) -> HubConfig:
    cfg = HubConfig()
    cfg.hub.data_dir = str(tmp_path)
    cfg.hub.contexts_dir = str(tmp_path)
    cfg.hub.shutdown_grace = 0.0
    cfg.memory.episodes = False  # episodic memory (Chroma, the embedder) is not what these tests are about
    return cfg


@pytest.fixture
def make_hub(config: HubConfig, said: Said) -> Callable[..., Hub]:
    def make(
        responses: Sequence[Any] | Callable[[ModelRequest], str] = reply_to_input,
        *,
        extra: Sequence[Extension] = (),
        **kw: Any,
    ) -> Hub:
        extensions = [test_extension(said), *extra]
        return Hub(config, model=ScriptedModel(responses), load_extensions=False, extensions=extensions, **kw)

    return make

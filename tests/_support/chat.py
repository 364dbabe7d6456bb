"""The recording test platform: a ``test:chat`` context whose ``test:say`` output records what
the bot said (:class:`Said`), a model that echoes the newest input, and the fixtures of hubs
built on them. The conftests of the folders whose tests use them import the fixtures."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from hub import Context, Extension, Hub, HubConfig, ScriptedModel, output
from hub.models import ModelRequest


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
def make_chat_hub(config: HubConfig, said: Said) -> Callable[..., Hub]:
    """``make_chat_hub(responses=reply_to_input, extra=[...])``: a hub on ``config`` whose platform
    is the test chat, recording into ``said``. It stops at once: a run still in flight is not waited for."""

    def make(
        responses: Sequence[Any] | Callable[[ModelRequest], str] = reply_to_input,
        *,
        extra: Sequence[Extension] = (),
        **kw: Any,
    ) -> Hub:
        extensions = [test_extension(said), *extra]
        config.hub.shutdown_grace = 0.0
        return Hub(config, model=ScriptedModel(responses), load_extensions=False, extensions=extensions, **kw)

    return make

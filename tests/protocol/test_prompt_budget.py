"""The prompt budget covers everything, whatever arrives: 100 concurrent 100 KB webhooks
joining one conversation are taken over several steps, each cut with a visible marker, and
no prompt exceeds the budget. A model with a context window of its own (the local one)
gets a budget that fits it, whatever is in the environment.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from hub import Hub, HubConfig, RunState, ScriptedModel
from hub.config import HttpSection, WebhookSection
from hub.engine import SUMMARY_SYSTEM
from hub.http import signature
from hub.models import ModelRequest, Usage
from hub.protocol import count_tokens
from tests._support.chat import Said, test_extension

SECRET = "pile-webhook-secret-0123456789"
N, SIZE = 100, 100_000


def prompt_tokens(request: ModelRequest) -> int:
    return count_tokens(request.system) + sum(count_tokens(m["content"]) for m in request.messages)


class GatedModel(ScriptedModel):
    """Answers every step with a short reply, once ``gate`` is open."""

    def __init__(self, gate: asyncio.Event, **kw: Any) -> None:
        super().__init__(default="<response><output>noted</output></response>", **kw)
        self.gate = gate

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage]:
        await self.gate.wait()
        async for chunk in super().stream(request):
            yield chunk


async def test_a_pile_of_large_webhooks_is_taken_over_several_steps_within_the_budget(
    config: HubConfig, said: Said
) -> None:
    config.http = HttpSection(port=0)
    config.webhooks = {"pile": WebhookSection(context="test:chat:42", secret=SECRET)}
    config.agent.max_steps = 60  # this test is about the budget, not the step limit
    gate = asyncio.Event()
    model = GatedModel(gate, chunk=64)
    hub = Hub(config, model=model, load_extensions=False, extensions=[test_extension(said)])
    budget = hub.prompts.budget
    assert budget == config.agent.prompt_budget == 6000

    async with hub, aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=N)) as session:
        assert hub.http is not None
        url = f"http://127.0.0.1:{hub.http.port}/webhooks/pile?wait=1"

        async def post(i: int) -> dict[str, Any]:
            body = json.dumps({"n": i, "blob": f"{i:03d}" + "x" * (SIZE - 3)}).encode()
            headers = {"X-Hub-Signature-256": signature(SECRET, body), "Content-Type": "application/json"}
            async with session.post(url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(60)) as resp:
                assert resp.status == 200, await resp.text()
                return await resp.json()

        posts = [asyncio.create_task(post(i)) for i in range(N)]
        while len(await hub.inbox.pending()) < N:  # every input recorded before the model answers
            await asyncio.sleep(0.01)
        gate.set()
        answers = await asyncio.gather(*posts)

    assert all(a["state"] == str(RunState.COMPLETED) for a in answers), {a["reason"] for a in answers}
    assert len(model.requests) > 1  # taken over several steps, not in one prompt
    for request in model.requests:
        assert prompt_tokens(request) <= budget
    seen: list[int] = []
    for request in model.requests:
        content = request.messages[0]["content"]
        new = [int(n) for n in re.findall(r'<input type="webhook"[^>]*new="true">\{"n": (\d+)', content)]
        assert len(new) <= 4  # a step takes a share of the pile that the prompt can show
        seen += new
        if new:
            assert "more characters cut]" in content  # the cut is visible, to the model too
    assert sorted(seen) == list(range(N))  # every input reached the model as new, exactly once


class WindowedModel(ScriptedModel):
    """A model with a context window of its own, as the local model has."""

    context_length = 1024
    max_tokens = 128


@pytest.mark.parametrize("style", ["xml", "chat"])
async def test_a_model_with_a_context_window_gets_prompts_that_fit_it_whatever_the_environment(
    config: HubConfig, said: Said, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    for name in ("TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "HUB_TEST_API_KEY"):  # what once reset the budget
        monkeypatch.setenv(name, f"{name.lower()}-0123456789")
    config.model.prompt_style = style  # type: ignore[assignment]
    model = WindowedModel(default="<response><output>ok</output></response>")
    hub = Hub(config, model=model, load_extensions=False, extensions=[test_extension(said)])
    assert hub.redactor  # secrets in the environment: redaction is on...
    budget = hub.prompts.budget
    assert budget == 1024 - 128 - 64  # ...and the budget still fits the window
    async with hub:
        for i in range(8):  # a long conversation of long messages
            result = await hub.send("test:chat:42", data=f"message {i}: " + "word " * 1500)
            assert result is not None and result.ok
    turns = [r for r in model.requests if r.system != SUMMARY_SYSTEM]  # compaction's calls fit too
    assert len(turns) == 8
    for request in model.requests:
        assert prompt_tokens(request) <= budget
    for request in turns:
        assert "message" in request.messages[-1]["content"]  # the newest input is there, cut to fit


@pytest.mark.parametrize("env", [{}, {"TELEGRAM_BOT_TOKEN": "123456:telegram-token", "X_API_KEY": "sk-0123456789"}])
def test_the_local_providers_budget_fits_its_context_whatever_the_environment(
    config: HubConfig, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    config.model.provider = "local"
    hub = Hub(config, load_extensions=False)  # the local model itself loads only when first asked
    assert hub.prompts.budget == config.model.context_length - 192 - 64

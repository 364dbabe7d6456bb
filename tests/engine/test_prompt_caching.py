"""Prompt caching (issue 41, item 4): every prompt style puts what is stable first and what
changes each turn last, so that a provider's cache (the longest identical prefix) serves
most of each prompt; the cached tokens the provider reports reach the run's record, its
trace, the metrics and its cost at ``[model] price_cached_input``.

The model is the real openai SDK path (``OpenAIModel``) against the loopback fake, which
plays a provider's prefix cache (``hub.testing.openai``)."""

from __future__ import annotations

from typing import Any

import pytest

from hub import Context, Extension, output
from hub.cli import render_trace
from hub.logs import StepLog
from hub.models.openai import OpenAIModel
from hub.models.scripted import prefix_length
from hub.store import RunState
from hub.testing import FakeOpenAI
from hub.testing.openai import prompt_text

TURNS = 4


def chat_ext(said: list[str]) -> Extension:
    """A conversation whose state (shown in the prompt) changes every run."""

    @output(type="t:say")
    async def say(content: str, ctx: Any) -> None:
        said.append(content)

    chat = Context(
        type="t:chat",
        outputs=[say],
        reply_output="t:say",
        render=lambda memory, ctx: f"volatile state of run {ctx.run.id}",
    )
    return Extension("t", contexts=[chat])


def answer(style: str) -> Any:
    """The fake's answer to request N: ``reply N``."""
    count = iter(range(1_000_000))

    def reply(body: dict[str, Any]) -> str:
        text = f"reply {next(count)}"
        return text if style in ("tools", "chat") else f"<response><output>{text}</output></response>"

    return reply


@pytest.mark.parametrize("style", ["xml", "tools", "chat"])
async def test_each_turns_prompt_is_a_prefix_of_the_next_up_to_what_changes(make_hub, config, style) -> None:
    config.model.prompt_style = style
    config.model.max_retries = 0
    said: list[str] = []
    async with FakeOpenAI(default=answer(style)) as fake:
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")
        async with make_hub(model, chat_ext(said)) as hub:
            for i in range(TURNS):
                result = await hub.send("t:chat:ann", None, f"message number {i}")
                assert result.state == RunState.COMPLETED, result.reason
        prompts = [prompt_text(b) for b in fake.bodies]
    assert len(prompts) == TURNS
    for i in range(1, TURNS - 1):
        p, nxt = prompts[i], prompts[i + 1]
        earlier = p.index(f"message number {i - 1}")  # history: shown before what changes
        changing = p.find("volatile state of run")
        if changing >= 0:  # the chat style shows no state
            assert earlier < changing, f"{style}: the state comes before the history"
        # everything up to the end of the history (the last turn's reply) is the next turn's prefix
        stable = p.index(f"reply {i - 1}") + len(f"reply {i - 1}")
        assert prefix_length(p, nxt) >= stable, f"{style}: turn {i}'s stable part is not the next one's prefix"


async def test_cached_tokens_reach_the_run_the_trace_the_metrics_and_the_cost(make_hub, config) -> None:
    config.model.prompt_style = "xml"
    config.model.max_retries = 0
    config.model.price_input = 2.0
    config.model.price_cached_input = 0.5
    config.model.price_output = 8.0
    said: list[str] = []
    async with FakeOpenAI(default=answer("xml")) as fake:
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")
        async with make_hub(model, chat_ext(said)) as hub:
            await hub.send("t:chat:ann", None, "hello there")
            result = await hub.send("t:chat:ann", None, "and again")
            record = await hub.runs.get(result.run_id)
            trace = await hub.runs.events(result.run_id)
            metrics = hub.metrics.render()[0].decode()
    assert result.state == RunState.COMPLETED
    assert record is not None and record.cached_tokens > 0, "the second turn's prompt shares the first's prefix"
    assert record.cached_tokens < record.prompt_tokens
    steps = [e for e in trace if isinstance(e, StepLog)]
    assert sum(s.cached_tokens for s in steps) == record.cached_tokens
    step = steps[0]
    expected = (step.prompt_tokens - step.cached_tokens) * 2.0 + step.cached_tokens * 0.5 + step.completion_tokens * 8.0
    assert step.cost == pytest.approx(expected / 1_000_000)
    assert record.cost == pytest.approx(sum(s.cost for s in steps))
    shown = render_trace(record, trace)  # hub trace: the run's and each step's cached tokens
    assert f"({record.cached_tokens} prompt cached)" in shown
    line = next(x for x in metrics.splitlines() if x.startswith('hub_tokens_total{kind="cached"}'))
    assert float(line.split()[-1]) >= record.cached_tokens


def test_price_cached_input_zero_prices_cached_tokens_as_input(config) -> None:
    config.model.price_input = 2.0
    config.model.price_output = 0.0
    assert config.model.cost(1000, 0, 600) == pytest.approx(config.model.cost(1000, 0))
    config.model.price_cached_input = 0.5
    assert config.model.cost(1000, 0, 600) == pytest.approx((400 * 2.0 + 600 * 0.5) / 1_000_000)

"""Context overflow never silences the bot (issue 41, item 3): with ``[agent] compaction``,
a model's "context too long", or history past the prompt budget, has the oldest history
summarised by the model into a summary kept in working memory; the run goes on, the summary
is in the prompt (and survives a restart), and a prompt too long even then fails the run
with the failure reply."""

from __future__ import annotations

from typing import Any

import pytest

from hub import ContextTooLong, ScriptedModel
from hub.engine import SUMMARY_SYSTEM
from hub.logs import StepLog, SummaryLog
from hub.models import ModelRequest, context_too_long
from hub.models.openai import OpenAIModel
from hub.store import RunState
from hub.testing import FakeOpenAI
from hub.testing.openai import prompt_text

CLI = ("cli:session", {"user": "ann"})
NAME_GIVEN = "Hello! My name is Zoltan Kodaly."
OVERFLOW = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens."


def is_summary_request(body: dict[str, Any]) -> bool:
    return body["messages"][0]["content"] == SUMMARY_SYSTEM


def model_that_reads(body: dict[str, Any]) -> str:
    """The fake's model: a summary keeps the user's name if it was given; an answer names
    the user if the prompt shows their name anywhere (history or summary)."""
    text = prompt_text(body)
    if is_summary_request(body):
        return "The user is called Zoltan Kodaly." if "Zoltan" in text else "Small talk about the weather."
    if "Zoltan" in text:
        return "<response><output>You are Zoltan.</output></response>"
    return "<response><output>I do not know your name.</output></response>"


async def test_context_length_exceeded_compacts_and_the_answer_knows_the_name_from_turn_1(
    make_hub, config, out
) -> None:
    config.model.max_retries = 0
    async with FakeOpenAI(default=model_that_reads) as fake:
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")
        async with make_hub(model) as hub:
            await hub.send(*CLI, NAME_GIVEN)
            for i in range(8):
                await hub.send(*CLI, f"Tell me something about the weather, part {i}.")
            fake.fail_next("chat", status=400, retry_after=None, code="context_length_exceeded", description=OVERFLOW)
            asked = len(fake.bodies)
            result = await hub.send(*CLI, "What is my name?")
            record = await hub.runs.get(result.run_id)
            trace = await hub.runs.events(result.run_id)
        bodies = fake.bodies[asked:]
        # refused, summarised, asked again: three requests for this turn
        assert len(bodies) == 3 and is_summary_request(bodies[1]) and not is_summary_request(bodies[2])
        assert "Zoltan" in prompt_text(bodies[1]), "turn 1 went into the summary"
        retried = prompt_text(bodies[2])
        assert NAME_GIVEN not in retried, "turn 1's entry was folded into the summary"
        assert "The user is called Zoltan Kodaly." in retried and "<summary" in retried
        assert result.state == RunState.COMPLETED, result.reason
        assert out.getvalue().splitlines()[-1] == "You are Zoltan."
        # the summary call is counted in the run's tokens (and so its cost and budgets)
        summaries = [e for e in trace if isinstance(e, SummaryLog)]
        assert len(summaries) == 1 and summaries[0].entries >= 2
        steps = [e for e in trace if isinstance(e, StepLog)]
        assert record is not None and record.prompt_tokens == sum(s.prompt_tokens for s in steps)
        main_only = fake.stats[-1]["prompt_tokens"]
        assert record.prompt_tokens == main_only + fake.stats[-2]["prompt_tokens"]

        # a restart keeps the summary: the next prompt still shows it
        async with make_hub(OpenAIModel("gpt-test", base_url=fake.url, api_key="k")) as hub:
            result = await hub.send(*CLI, "Do you still know my name?")
        assert result.state == RunState.COMPLETED
        after = prompt_text(fake.bodies[-1])
        assert "The user is called Zoltan Kodaly." in after and NAME_GIVEN not in after
        assert out.getvalue().splitlines()[-1] == "You are Zoltan."


async def test_history_over_the_budget_is_summarised_and_the_summary_updated(make_hub, config) -> None:
    config.agent.prompt_budget = 900
    summaries: list[str] = []

    def respond(request: ModelRequest) -> str:
        text = request.messages[0]["content"]
        if request.system == SUMMARY_SYSTEM:
            summaries.append(text)
            return f"summary number {len(summaries)}" + (" (Zoltan)" if "Zoltan" in text else "")
        return "<response><output>" + "ok " * 40 + "</output></response>"

    model = ScriptedModel(respond)
    async with make_hub(model) as hub:
        await hub.send(*CLI, "My name is Zoltan.")
        for i in range(25):
            result = await hub.send(*CLI, f"message {i} " + "words " * 30)
            assert result.state == RunState.COMPLETED, result.reason
        kept = await hub.memory.get("working-memory:cli:session:ann")
    assert len(summaries) >= 2, "compacted more than once as the history grew"
    assert "summary number 1 (Zoltan)" in summaries[1], "a new summary folds the one before it"
    assert kept[0]["kind"] == "summary" and "(Zoltan)" in kept[0]["content"]
    last = model.requests[-1]
    assert f"summary number {len(summaries)} (Zoltan)" in last.messages[0]["content"]
    assert not last.metadata.get("history_cut"), "after compacting, the history fits the budget"


async def test_a_prompt_too_long_even_compacted_fails_the_run_with_the_failure_reply(make_hub, config, out) -> None:
    refused = ContextTooLong(OVERFLOW, status=400)
    ok = "<response><output>fine</output></response>"
    # two turns, then: refused, the summary, refused again
    model = ScriptedModel([ok, ok, refused, "The user is called Zoltan.", refused])
    async with make_hub(model) as hub:
        await hub.send(*CLI, NAME_GIVEN)
        await hub.send(*CLI, "and the weather?")
        result = await hub.send(*CLI, "What is my name?", user="ann")
    assert result.state == RunState.FAILED and "maximum context length" in (result.reason or "")
    assert len(model.requests) == 5, "refused, summarised, refused again: no loop"
    assert model.requests[3].system == SUMMARY_SYSTEM
    assert out.getvalue().splitlines()[-1] == config.agent.failure_reply


async def test_without_compaction_a_refused_prompt_fails_with_the_failure_reply(make_hub, config, out) -> None:
    config.agent.compaction = False
    model = ScriptedModel([ContextTooLong("prompt is too long: 210000 tokens > 200000 maximum", status=400)])
    async with make_hub(model) as hub:
        result = await hub.send(*CLI, "hi", user="ann")
    assert result.state == RunState.FAILED
    assert out.getvalue().strip() == config.agent.failure_reply


@pytest.mark.parametrize(
    "message",
    [
        OVERFLOW,  # OpenAI, vLLM
        "the request exceeds the available context size, try increasing it",  # llama.cpp
        "Context size has been exceeded.",  # llama.cpp (older)
        "prompt too long; exceeded max context length by 120 tokens",  # Ollama
        "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
        "prompt is too long: 210000 tokens > 200000 maximum",  # Anthropic-compatible
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens",  # vLLM
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",  # Gemini
    ],
)
def test_the_phrasings_of_compatible_servers_are_context_too_long(message: str) -> None:
    assert context_too_long(message)


def test_other_errors_are_not_context_too_long() -> None:
    assert context_too_long("whatever", "context_length_exceeded")
    assert not context_too_long("Rate limit reached for requests", "rate_limit_exceeded")
    assert not context_too_long("Invalid API key", None)


async def test_the_openai_model_raises_context_too_long_from_a_phrasing_without_a_code() -> None:
    async with FakeOpenAI(["never"]) as fake:
        fake.fail_next("chat", status=400, retry_after=None, description="prompt too long; exceeded max context length")
        model = OpenAIModel("gpt-test", base_url=fake.url, api_key="k")
        with pytest.raises(ContextTooLong) as caught:
            async for _ in model.stream(ModelRequest(system="s", messages=[{"role": "user", "content": "x"}])):
                pass
        await model.close()
    assert caught.value.status == 400 and not caught.value.retryable


async def test_a_failed_summary_leaves_the_history_and_is_tried_once_a_run(make_hub, config) -> None:
    from hub import Extension, action
    from hub.errors import ModelError
    from hub.logs import ErrorLog

    config.agent.prompt_budget = 900

    @action(name="look")
    async def look(args: dict, ctx: Any) -> str:
        return "seen"

    summary_calls = 0
    answer = "<response><output>" + "ok " * 40 + "</output></response>"

    def respond(request: ModelRequest) -> Any:
        nonlocal summary_calls
        if request.system == SUMMARY_SYSTEM:
            summary_calls += 1
            return ModelError("the summariser is down", retryable=False)
        if "go look" in request.messages[0]["content"] and 'name="look"' not in request.messages[0]["content"]:
            return '<response><action_call name="look">{}</action_call></response>'
        return answer

    model = ScriptedModel(respond)  # it answers an error too
    async with make_hub(model, Extension("t", actions=[look])) as hub:
        for i in range(12):
            await hub.send(*CLI, f"message {i} " + "words " * 30)
        before = summary_calls
        result = await hub.send(*CLI, "go look")
    assert result.state == RunState.COMPLETED, result.reason
    assert result.steps == 2 and any(getattr(e, "kind", "") == "action_result" for e in result.logs)
    assert summary_calls - before == 1, "one summary attempt in a run of two steps"
    assert any(isinstance(e, ErrorLog) and "compaction failed" in e.message for e in result.logs)

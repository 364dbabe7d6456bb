"""A model whose stream breaks at every element boundary, or is cut at the token limit there:
only closed elements act, nothing acts twice, nothing cut off is delivered as if whole."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from hub import Context, Extension, action, output
from hub.engine import CUT_OFF_MARK
from hub.errors import ModelError
from hub.store import RunState

from .faults import FunctionModel, boundaries, broken, calls_of, check, delivered, send_bounded, snapshot

CLI = "cli:session"

RESPONSE = (
    "<response><reasoning>look it up first</reasoning>"
    '<output type="cli:message">One moment.</output>'
    '<action_call name="lookup">{"q": "answer"}</action_call>'
    '<action_call name="wipe">{}</action_call>'
    "</response>"
)
FINAL = '<response><output type="cli:message">The answer is 42.</output></response>'
WHOLE = {"One moment.", "The answer is 42."}


class Q(BaseModel):
    q: str


class NoArgs(BaseModel):
    pass


def tools(ran: list[str]) -> Extension:
    @action(name="lookup")
    async def lookup(args: Q, ctx) -> dict:
        ran.append("lookup")
        return {"answer": 42}

    @action(name="wipe", critical=True)
    async def wipe(args: NoArgs, ctx) -> str:
        ran.append("wipe")
        return "wiped"

    return Extension("t", actions=[lookup, wipe])


def model(cut: int, end) -> FunctionModel:  # type: ignore[no-untyped-def]
    """Ann's first request: RESPONSE up to ``cut``, then ``end`` (an error or a finish
    reason); her next ones: RESPONSE whole if nothing of hers acted yet, else FINAL. Others
    get FINAL."""
    first = [True]

    def fn(request):  # type: ignore[no-untyped-def]
        prompt = request.system + "".join(m["content"] for m in request.messages)
        if "what is the answer?" not in prompt:
            return FINAL
        if first[0]:
            first[0] = False
            return RESPONSE[:cut], end
        return FINAL if "<action_result" in prompt or "One moment." in prompt else RESPONSE

    return FunctionModel(fn, chunk=7)


CUTS = boundaries(RESPONSE)


async def _run(make_hub, cut: int, end) -> tuple:  # type: ignore[no-untyped-def]
    ran: list[str] = []
    hub = make_hub(model(cut, end), tools(ran))
    async with hub:
        other = await send_bounded(hub, CLI, {"user": "bob"}, "hello")
        others = {("cli:session:bob", other.run_id): await snapshot(hub, "cli:session:bob", other.run_id)}
        result = await send_bounded(hub, CLI, {"user": "ann"}, "what is the answer?")
        await check(hub, result, others=others)
    return result, ran


@pytest.mark.parametrize("cut", CUTS)
async def test_a_stream_that_breaks_at_an_element_boundary(make_hub, cut: int) -> None:
    result, ran = await _run(make_hub, cut, broken())
    assert result.state == RunState.COMPLETED, result.reason
    # every action ran at most once, and only from a closed call
    assert ran.count("lookup") <= 1 and ran.count("wipe") <= 1
    for name in ("lookup", "wipe"):
        assert ran.count(name) == sum(1 for c in calls_of(result, name) if isinstance(c.args, dict))
    # nothing was said twice, and nothing cut off was said as if whole
    said = delivered(result)
    assert len(said) == len(set(said))
    assert all(s in WHOLE or s.endswith(CUT_OFF_MARK) for s in said)
    assert "The answer is 42." in said or "One moment." in said


@pytest.mark.parametrize("cut", CUTS)
async def test_a_response_cut_at_the_token_limit(make_hub, cut: int) -> None:
    result, ran = await _run(make_hub, cut, "length")
    assert result.state == RunState.COMPLETED, result.reason
    text = RESPONSE[:cut]
    # a call whose closing tag did not arrive never runs (the critical one included): each
    # ran once if its call closed in the cut response, or once from a later whole response
    closed = {"lookup": '"answer"}</action_call>' in text, "wipe": "{}</action_call>" in text}
    for name in ("lookup", "wipe"):
        assert ran.count(name) == sum(1 for c in calls_of(result, name) if isinstance(c.args, dict)) <= 1
        if closed[name]:
            assert ran.count(name) == 1
    for c in calls_of(result, "lookup") + calls_of(result, "wipe"):
        if not isinstance(c.args, dict):  # a cut-off call: refused, and the model was told
            assert any(getattr(e, "call_id", None) == c.id and "cut off" in (e.error or "") for e in result.logs)
    said = delivered(result)
    assert all(s in WHOLE or s.endswith(CUT_OFF_MARK) for s in said)
    if '<output type="cli:message">One' in text and "One moment.</output>" not in text:
        assert any(s.endswith(CUT_OFF_MARK) for s in said), said


PLAIN = "Sure! The three steps are: first, back up your data; second, restore it; third, check it."


@pytest.mark.parametrize("cut", [20, 60, len(PLAIN) - 1])
@pytest.mark.parametrize("retryable", [False, True])
async def test_a_plain_text_reply_that_breaks_is_sent_marked_when_on_error_continues(
    make_hub, config, cut: int, retryable: bool
) -> None:
    """A small model's untagged reply whose stream breaks, with an ``on_error`` that answers
    "continue": what was read goes out, marked as cut off, never as if whole."""
    said: list[str] = []
    decided: list[str] = []

    def on_error(e, ctx) -> str:  # type: ignore[no-untyped-def]
        decided.append(str(e))
        return "continue"

    def fn(request):  # type: ignore[no-untyped-def]
        return PLAIN[:cut], ModelError("injected: connection reset by peer", retryable=retryable)

    @output(type="t:say")
    async def say(content: str, ctx) -> None:  # type: ignore[no-untyped-def]
        said.append(content)

    chat = Context(type="t:chat", outputs=[say], reply_output="t:say", on_error=on_error)
    config.model.max_retries, config.model.retry_base_delay = 1, 0.01
    async with make_hub(FunctionModel(fn, chunk=7), Extension("t", contexts=[chat])) as hub:
        result = await send_bounded(hub, "t:chat:ann", None, "how do I migrate?")
    assert result.state == RunState.COMPLETED, result.reason
    assert decided == ["injected: connection reset by peer"]
    assert said == [PLAIN[:cut].strip() + CUT_OFF_MARK]
    assert delivered(result) == said

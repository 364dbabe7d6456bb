"""Values that used to make a write fail, through the hub: a lone surrogate in an input, an
action result and the model's text; NaN and Infinity in an input. Every run ends in its true
state, its row is terminal, its input is handled, and the next message is answered."""

from __future__ import annotations

import math

from pydantic import BaseModel

from hub import Extension, action
from hub.runs import RunState


class Nothing(BaseModel):
    pass


@action(name="odd", description="Returns odd values.")
async def odd(args: Nothing, ctx) -> dict:
    return {"text": "x\udfffy", "n": math.nan, "big": math.inf}


async def test_surrogates_and_non_finite_numbers_never_wedge_a_conversation(make_hub, out) -> None:
    responses = [
        '<response><action_call name="odd">{}</action_call></response>',
        "<response><output>half \ud83d of an emoji</output></response>",
        "<response><output>next</output></response>",
    ]
    async with make_hub(responses, Extension(name="odd", actions=[odd])) as hub:
        first = await hub.send("cli:session", {"user": "ann"}, {"s": "\ud800", "v": [math.nan, -math.inf]})
        assert first.state == RunState.COMPLETED, first.reason
        row = await hub.runs.get(first.run_id)
        assert row.state == RunState.COMPLETED and row.ended is not None
        events = await hub.runs.events(first.run_id)
        assert events[0].content == {"s": "\ufffd", "v": [None, None]}
        assert any(getattr(e, "content", None) == "half \ufffd of an emoji" for e in events)
        assert await hub.inbox.pending() == []
        assert (await hub.memory.get("working-memory:cli:session:ann")) is not None
        second = await hub.send("cli:session", {"user": "ann"}, "and now?")
        assert second.ok and "next" in out.getvalue()
        assert await hub.runs.list(state="running") == []

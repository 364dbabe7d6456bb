"""Values that used to make a write fail, through the hub: a lone surrogate in an input, an
action result and the model's text; NaN and Infinity in an input. Every run ends in its true
state, its row is terminal, its input is handled, and the next message is answered."""

from __future__ import annotations

import math

import pytest
from pydantic import BaseModel

from hub import Extension, action
from hub.store import RunState


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


def test_dumps_writes_what_the_json_module_would_for_values_orjson_treats_apart() -> None:
    import dataclasses
    import datetime
    import json

    from hub.store.sql import dumps

    @dataclasses.dataclass
    class Point:
        x: int

    when = datetime.datetime(2026, 1, 2, 3, 4, 5)
    # what the json module wrote before orjson took the common case: keys as strings,
    # repr() for what JSON cannot hold, NaN as null (orjson writes these itself)...
    value = {1: "int key", "p": Point(1), "t": when, "nan": math.nan, "inf": -math.inf}
    assert json.loads(dumps(value)) == {"1": "int key", "p": repr(Point(1)), "t": repr(when), "nan": None, "inf": None}
    # ...and big ints whole, a lone surrogate as U+FFFD (orjson refuses these: json writes them)
    assert json.loads(dumps({"big": 2**70, "s": "a\ud800b"})) == {"big": 2**70, "s": "a\ufffdb"}
    assert json.loads(dumps({"ok": [1, 2.5, None, True, "é"]})) == {"ok": [1, 2.5, None, True, "é"]}
    with pytest.raises(TypeError):
        dumps({"s": {1, 2}}, default=None)

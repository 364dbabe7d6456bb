"""Helpers a turn calls many times, made cheaper (issue 41, item 6), still give what they
gave: the UTC day across midnights, ids that are UUID4s, an output's declared attributes."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid

import pytest
from pydantic import BaseModel, ConfigDict, Field

from hub.engine._outputs import _attribute_names
from hub.features import utc_day
from hub.logs import new_id


def test_utc_day_is_the_utc_date_of_any_moment_across_midnights_and_years() -> None:
    moments = [0.0, -1.0, 86_399.999, 86_400.0, 951_782_400 + 86_399.5, 1_798_761_599.9, 1_798_761_600.0]
    moments += [1_700_000_000 + k * 3_601.7 for k in range(200)]  # about eight days, hour by hour
    for ts in moments:  # in an order that moves back and forth between days
        assert utc_day(ts) == time.strftime("%Y-%m-%d", time.gmtime(ts)), ts
    assert utc_day() == time.strftime("%Y-%m-%d", time.gmtime())


def test_new_ids_are_random_uuid4s_as_32_hex_digits() -> None:
    ids = [new_id() for _ in range(2_000)]
    assert len(set(ids)) == len(ids)
    for i in ids:
        u = uuid.UUID(hex=i)
        assert (u.hex, u.version, u.variant) == (i, 4, uuid.RFC_4122)


def test_an_outputs_declared_attribute_names_include_aliases_and_extra_allow_takes_any() -> None:
    class Attrs(BaseModel):
        to: str = ""
        thread_id: str = Field("", alias="thread")
        tone: str = Field("", validation_alias="mood")

    class Open(BaseModel):
        model_config = ConfigDict(extra="allow")

    assert _attribute_names(Attrs) == {"to", "thread_id", "thread", "tone", "mood"}
    assert _attribute_names(Open) is None


def test_a_log_entry_reads_back_from_its_dict_and_unknown_keys_are_still_ignored() -> None:
    from hub.logs import (
        ActionCallLog,
        ActionResultLog,
        InputLog,
        MediaPart,
        OutputLog,
        StateLog,
        StepLog,
        SummaryLog,
        ThoughtLog,
        from_dict,
        to_dict,
    )

    entries = [
        InputLog(type="text", content="hi", user="u1", meta={"a": 1}),
        InputLog(type="text", content="pic", media=[MediaPart(kind="image", ref="r1", mime="image/png")]),
        ThoughtLog(content="hmm", step=2),
        ActionCallLog(name="getWeather", args={"location": "NYC"}, index=1, step=1),
        ActionResultLog(call_id="c1", name="getWeather", ok=True, data={"t": 72}, step=1),
        OutputLog(type="chat", content="sunny", attrs={"id": "1"}, sent=True),
        StepLog(step=3, prompt_tokens=10),
        StateLog(state="completed", reason=None),
        SummaryLog(content="before", entries=4),
    ]
    for e in entries:
        d = to_dict(e)
        names = [f.name for f in dataclasses.fields(e) if f.name != "media" or (isinstance(e, InputLog) and e.media)]
        assert list(d) == [*names, "kind"] and d["kind"] == e.kind
        assert all(d[n] is getattr(e, n) for n in names if n != "media")  # the values themselves
        assert from_dict(d) == e
        assert from_dict(json.loads(json.dumps(d))) == e  # as the store gives it back
        older = {**d, "gone": "a field an older release wrote"}
        assert from_dict(older) == e
    before_drafts = {k: v for k, v in to_dict(entries[0]).items() if k != "drafts"}  # an older shape
    assert from_dict({**before_drafts, "media": []}) == entries[0] == from_dict({**before_drafts, "x": 1})
    with_media = to_dict(entries[1])
    assert isinstance(from_dict(json.loads(json.dumps(with_media))).media[0], MediaPart)  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="unknown log kind"):
        from_dict({"kind": "nope"})


def test_the_in_memory_store_copies_values_whole_and_shares_no_container() -> None:
    import enum
    from collections import OrderedDict

    from hub.store._in_memory import _copy, _NotJson

    class Level(enum.IntEnum):
        HIGH = 3

    value = {
        "h": [{"id": "a", "args": {"x": [1, 2.5, None, True]}, "t": (1, [2])}],
        "o": OrderedDict(b=1),
        "l": Level.HIGH,
        "n": float("nan"),
    }
    out = _copy(value)
    assert repr(out) == repr({**value, "o": {"b": 1}}) and type(out["o"]) is dict
    assert type(out["h"][0]["t"]) is tuple and out["l"] is Level.HIGH

    def containers(v: object) -> list[int]:
        if isinstance(v, dict):
            return [id(v), *(i for x in v.values() for i in containers(x))]
        if isinstance(v, (list, tuple)):
            return [id(v), *(i for x in v for i in containers(x))]
        return []

    tuples = {id(value["h"][0]["t"])}  # a tuple is rebuilt too, but its identity is no hazard
    assert not (set(containers(out)) & set(containers(value))) - tuples
    for bad in [{"a": [object()]}, {"a": {1: 2}}, [{"k": {2: "x"}}], {3: 1}]:
        with pytest.raises(_NotJson):
            _copy(bad)

"""Helpers a turn calls many times, made cheaper (issue 41, item 6), still give what they
gave: the UTC day across midnights, ids that are UUID4s, an output's declared attributes."""

from __future__ import annotations

import time
import uuid

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

"""The SSE reader against the openai SDK's own decoder (``openai._streaming.SSEDecoder``),
over generated streams cut at every place: the same ``data`` of every event."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from hypothesis import given, settings
from hypothesis import strategies as st
from openai._streaming import SSEDecoder

from hub.models.openai import _sse_events

VALUE = st.text(st.characters(blacklist_characters="\r\n", codec="utf-8"), min_size=1, max_size=12)
FIELD = st.one_of(
    VALUE.map(lambda v: "data: " + v),
    VALUE.map(lambda v: "data:" + v),
    VALUE.map(lambda v: ": " + v),  # a comment
    VALUE.map(lambda v: "event: " + v),
)
EVENT = st.lists(FIELD, min_size=1, max_size=4)


async def _body(data: bytes, cuts: list[int]) -> AsyncIterator[bytes]:
    last = 0
    for cut in sorted(set(cuts)):
        if last < cut < len(data):
            yield data[last:cut]
            last = cut
    yield data[last:]


async def _ours(data: bytes, cuts: list[int]) -> list[bytes]:
    return [e async for events in _sse_events(_body(data, cuts)) for e in events]


async def _sdks(data: bytes) -> list[bytes]:
    async def one() -> AsyncIterator[bytes]:
        yield data

    return [sse.data.encode() async for sse in SSEDecoder().aiter_bytes(one()) if sse.data]


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(EVENT, max_size=6),
    newline=st.sampled_from(["\n", "\r\n"]),
    ended=st.booleans(),
    cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=8),
)
def test_every_event_is_read_as_the_sdk_reads_it(
    events: list[list[str]], newline: str, ended: bool, cuts: list[int]
) -> None:
    text = "".join(newline.join(fields) + newline + newline for fields in events)
    if not ended and text:  # the body stops after an event's last line, without its blank line
        text = text[: -len(newline)]
    data = text.encode()
    # an event the body cut short is still read (the SDK drops it): what came is the model's
    whole = data if ended or not text else data + newline.encode()
    assert asyncio.run(_ours(data, cuts)) == asyncio.run(_sdks(whole))


def test_a_chat_stream_is_one_list_per_read() -> None:
    body = b'data: {"a": 1}\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n'
    assert asyncio.run(_ours(body, [])) == [b'{"a": 1}', b'{"b": 2}', b"[DONE]"]

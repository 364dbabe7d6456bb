"""The SSE reader against the openai SDK's own decoder (``openai._streaming.SSEDecoder``),
over generated streams cut at every place: the same ``data`` of every event."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from openai._streaming import SSEDecoder

from hub.errors import ModelError
from hub.models.openai import _Chunks, _sse_events

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


# --- a read's events parsed as one array: the same as one by one ---------------------------

_EVENT_DATA = st.one_of(
    VALUE.map(lambda v: orjson.dumps({"choices": [{"delta": {"content": v}}]})),
    st.just(b'{"choices":[{"delta":{},"finish_reason":"stop"}]}'),
    st.just(b"[DONE]"),
    st.just(b"{not json"),
    st.just(b"1,2"),  # two values in one event: not one chunk
    st.just(b"[1]"),  # JSON, not a chunk: skipped
    st.just(b""),
)


def _one_by_one(events: list[bytes]) -> tuple[list[str], bool, bool]:
    """The reading before the array: each event parsed alone (the reference)."""
    pieces: list[str] = []
    for data in events:
        if data == b"[DONE]":
            return pieces, False, True
        try:
            chunk = orjson.loads(data)
        except ValueError:
            return pieces, True, False
        if isinstance(chunk, dict):
            for choice in chunk.get("choices") or ():
                text = (choice.get("delta") or {}).get("content")
                if text:
                    pieces.append(text)
    return pieces, False, False


@settings(max_examples=300, deadline=None)
@given(events=st.lists(_EVENT_DATA, min_size=1, max_size=8))
def test_a_reads_events_are_read_as_one_by_one(events: list[bytes]) -> None:
    chunks = _Chunks("m")
    pieces: list[str] = []
    try:
        chunks.read(events, pieces)
        broke = False
    except ModelError as e:
        assert "invalid JSON" in str(e)
        broke = True
    assert (pieces, broke, chunks.done) == _one_by_one(events)

"""The SQL stores read a stored value with orjson where it gives what json gives, and with
json everywhere else: any JSON text json reads (NaN, integers beyond 64 bits, a lone
surrogate's escape, numbers too large for a float) reads the same."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hub.store.sql._values import loads

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.sampled_from([2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64 - 1, 2**64])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
)


def same(a: Any, b: Any) -> bool:
    return repr(a) == repr(b) and type(a) is type(b)  # repr: NaN equals itself, 1 is not 1.0


@settings(max_examples=400, deadline=None)
@given(values, st.booleans())
def test_a_value_reads_back_as_json_reads_it(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert same(loads(text), json.loads(text)), text


def test_the_texts_orjson_reads_otherwise_or_not_at_all_read_as_json_reads_them() -> None:
    for text in [
        "[18446744073709551616]",  # past 64 bits: orjson would give a float
        "[-9223372036854775809]",
        "123456789012345678901234567890",
        "[NaN, Infinity, -Infinity]",
        '"\\ud800"',  # a lone surrogate's escape
        "1e400",
        '{"a": 1, "a": 2}',
    ]:
        assert same(loads(text), json.loads(text)), text


def test_digits_inside_a_string_are_read_by_orjson(monkeypatch: Any) -> None:
    # a hex id holds a run of 19 digits now and then: it is no number, and must not send a
    # conversation's whole history to json's slower reader at every turn
    import hub.store.sql._values as values

    class NoJson:
        @staticmethod
        def loads(text: str) -> Any:
            raise AssertionError(f"read by json: {text}")

    monkeypatch.setattr(values, "json", NoJson)
    text = '[{"id": "f1234567890123456789012345abcdef", "n": 12, "s": "a 1234567890123456789b"}]'
    assert loads(text) == json.loads(text)


def test_a_long_number_after_blanks_still_reads_as_json_reads_it() -> None:
    for text in ["[ 18446744073709551616]", '{"a":\n  -18446744073709551616}', "  18446744073709551616"]:
        assert same(loads(text), json.loads(text)), text


def _old_dumps(value: Any) -> str:
    """What ``dumps(value, default=None)`` wrote before it tried orjson (json's path only)."""
    from hub.store.sql._values import _finite, clean_text

    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(value), ensure_ascii=False, allow_nan=False)
    return clean_text(text)


@settings(max_examples=400, deadline=None)
@given(values)
def test_a_value_is_written_as_json_wrote_it(value: Any) -> None:
    from hub.store.sql._values import dumps

    assert same(json.loads(dumps(value, default=None)), json.loads(_old_dumps(value)))


def test_what_json_refuses_is_refused_and_its_subclasses_written_as_json_writes_them() -> None:
    import enum
    import uuid

    import pytest

    from hub.store.sql._values import dumps

    class Colour(enum.Enum):
        RED = 1

    class Level(enum.IntEnum):
        HIGH = 3

    class Name(str):
        pass

    for bad in [{"a": [Colour.RED]}, {"id": uuid.uuid4()}, [object()], {1: {"x": uuid.uuid4()}}]:
        with pytest.raises(TypeError):
            dumps(bad, default=None)
    for ok in [{"level": Level.HIGH, "name": Name("x")}, {1: 2, None: [1.5]}, ((1, 2), [3])]:
        assert json.loads(dumps(ok, default=None)) == json.loads(_old_dumps(ok))
    circular: list[Any] = []
    circular.append(circular)
    with pytest.raises(ValueError, match="ircular"):
        dumps(circular, default=None)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["[", "]", ",", ":", " ", "\n", "-", ".", '"', "a", "1", "0", "\x00", "é", "\ud800", "1234567890123456789"]
        ),
        max_size=12,
    )
)
def test_the_long_number_check_agrees_with_a_regular_expression_of_it(parts: list[str]) -> None:
    import re

    from hub.store.sql._values import _long_number

    text = "".join(parts)
    assert _long_number(text) == bool(re.search(r"(?:^|[\[,:])[ \t\r\n]*-?[0-9]{19}", text)), text

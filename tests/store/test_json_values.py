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

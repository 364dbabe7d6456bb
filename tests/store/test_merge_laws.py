"""The three-way merge's laws (``hub.store.merge3``), on generated JSON documents: merging a
change with an unchanged side gives the change; changes to different leaves both survive;
a declared counter's increments add; a leaf that is not a counter is never summed; an
append survives the other side's trim."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hub.store import merge3

_KEYS = st.sampled_from(["a", "b", "c", "visits", "name", "log"])
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-50, 50), st.text(max_size=4))
_DOCS = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=12,
)
_OBJECTS = st.dictionaries(_KEYS, _DOCS, min_size=2, max_size=5)


def _leaf_paths(doc: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The paths of the dict entries whose value is not a dict (lists count as leaves)."""
    if not isinstance(doc, dict) or not doc:
        return [path] if path else []
    return [p for k, v in doc.items() for p in _leaf_paths(v, (*path, k))]


def _set(doc: Any, path: tuple[str, ...], value: Any) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return out


def _get(doc: Any, path: tuple[str, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


@settings(max_examples=100, deadline=None)
@given(base=_DOCS, change=_DOCS)
def test_a_change_merged_with_an_unchanged_side_is_the_change(base: Any, change: Any) -> None:
    assert merge3(base, change, copy.deepcopy(base)) == change
    assert merge3(base, copy.deepcopy(base), change) == change


@settings(max_examples=100, deadline=None)
@given(base=_OBJECTS, data=st.data(), ours_value=_LEAVES, theirs_value=_LEAVES)
def test_changes_to_different_leaves_both_survive(base: Any, data: Any, ours_value: Any, theirs_value: Any) -> None:
    paths = _leaf_paths(base)
    disjoint = [(p, q) for p in paths for q in paths if p[: len(q)] != q and q[: len(p)] != p]
    if not disjoint:
        return
    p, q = data.draw(st.sampled_from(disjoint))
    ours, theirs = _set(base, p, ours_value), _set(base, q, theirs_value)
    assert merge3(base, ours, theirs) == _set(ours, q, theirs_value)


@settings(max_examples=100, deadline=None)
@given(start=st.integers(0, 1000), mine=st.integers(1, 20), other=st.integers(1, 20), rest=_OBJECTS)
def test_a_counters_increments_add_and_other_numbers_are_last_writer_wins(
    start: int, mine: int, other: int, rest: dict[str, Any]
) -> None:
    base = {**rest, "stats": {"visits": start, "last_seen": start}}
    ours = _set(_set(base, ("stats", "visits"), start + mine), ("stats", "last_seen"), start + mine)
    theirs = _set(_set(base, ("stats", "visits"), start + other), ("stats", "last_seen"), start + other)
    merged = merge3(base, ours, theirs, counters=["stats.visits"])
    assert merged["stats"]["visits"] == start + mine + other
    assert merged["stats"]["last_seen"] == start + mine  # ours saved last; never the sum
    assert merge3(None, {"n": mine}, {"n": other})["n"] == mine  # two first writes: the later one
    assert merge3(None, {"n": mine}, {"n": other}, counters=["n"])["n"] == mine + other


@settings(max_examples=100, deadline=None)
@given(
    history=st.lists(st.integers(-100, 99), min_size=1, max_size=6, unique=True),
    mine=st.lists(st.integers(100, 200), min_size=1, max_size=3, unique=True),
    theirs_new=st.lists(st.integers(300, 400), min_size=1, max_size=3, unique=True),
    trim=st.integers(0, 6),
)
def test_appends_survive_unless_both_removed_the_item(
    history: list[int], mine: list[int], theirs_new: list[int], trim: int
) -> None:
    ours = (history + mine)[trim:]  # a history kept to a bound: appended, then trimmed
    theirs = history + theirs_new
    merged = merge3({"log": history}, {"log": ours}, {"log": theirs})["log"]
    assert [x for x in merged if x >= 300] == theirs_new  # their appends kept, in order
    assert [x for x in merged if 100 <= x <= 200] == [x for x in ours if 100 <= x <= 200]
    assert [x for x in merged if x < 100] == [x for x in history if x in ours]  # ours trimmed them

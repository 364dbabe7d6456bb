"""Three-way merge of JSON values: what a run changed in a memory it loaded (``base`` to
``ours``) applied onto what the store holds now (``theirs``), when another run or worker
saved the same memory in between.

- a part only one side changed takes that side's value (a key added, set or removed);
- a number both changed adds the two changes (``visits`` 3 -> 4 here and 3 -> 4 there: 5);
- a list both only appended to keeps both appends, theirs first;
- a dict both changed is merged key by key;
- anything else both changed to different values takes ours: this run saves last.

A value that was absent (None, or a missing key) counts as the empty one of the kind both
sides made (0, ``{}``, ``[]``): two first visits make 2, not 1.
"""

from __future__ import annotations

from typing import Any

__all__ = ["merge3"]

_ABSENT: Any = object()
_EMPTY: dict[type, Any] = {int: 0, float: 0.0, dict: {}, list: []}


def merge3(base: Any, ours: Any, theirs: Any) -> Any:
    """``theirs`` with the changes from ``base`` to ``ours`` applied (see the module doc).
    A key absent on one side is passed as absent, not None: None is a value."""
    if (base is None or base is _ABSENT) and type(ours) is type(theirs) and type(ours) in _EMPTY:
        base = _EMPTY[type(ours)]  # nothing yet: both started from empty
    if _same(ours, base):
        return theirs
    if _same(theirs, base):
        return ours
    if _number(base) and _number(ours) and _number(theirs):
        return theirs + (ours - base)
    if isinstance(base, list) and isinstance(ours, list) and isinstance(theirs, list):
        n = len(base)
        if ours[:n] == base and theirs[:n] == base:
            return theirs + ours[n:]
        return ours
    if isinstance(base, dict) and isinstance(ours, dict) and isinstance(theirs, dict):
        merged: dict[str, Any] = {}
        for key in {**theirs, **ours}.keys() | base.keys():
            value = merge3(base.get(key, _ABSENT), ours.get(key, _ABSENT), theirs.get(key, _ABSENT))
            if value is not _ABSENT:
                merged[key] = value
        # the order the keys had: theirs first, then what ours added
        order = [k for k in theirs if k in merged] + [k for k in ours if k in merged and k not in theirs]
        return {k: merged[k] for k in order}
    return ours


def _same(a: Any, b: Any) -> bool:
    if a is _ABSENT or b is _ABSENT:
        return a is b
    return type(a) is type(b) and a == b


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)

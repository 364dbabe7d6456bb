"""Three-way merge of JSON values: what a run changed in a memory it loaded (``base`` to
``ours``) applied onto what the store holds now (``theirs``), when another run or worker
saved the same memory in between.

- a part only one side changed takes that side's value (a key added, set or removed);
- a dict both changed is merged key by key;
- a list both changed keeps theirs, less the items ours removed, plus the items ours
  appended: an append survives unless the other side removed that very item (a history one
  side trimmed while the other appended keeps the append);
- a number at a path declared a **counter** adds the two changes (``visits`` 3 -> 4 here and
  3 -> 4 there: 5; absent counts as 0, so two first visits make 2);
- anything else both changed to different values takes ours, the later save: last writer
  wins per leaf. A number not declared a counter is a leaf like any other (two writers of
  ``last_seen`` never add up).

Counters are declared per field, where the memory is declared (``Context(counters=...)``,
``@action(counters=...)``), as paths: ``"visits"``, ``"stats.steps"``, ``"by_user.*"`` (``*``
is any key) and ``"$"`` for the value itself (a memory that is one number).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

__all__ = ["merge3", "Counters", "counter_paths"]

_ABSENT: Any = object()

Counters = frozenset[tuple[str, ...]]
"""Counter paths, parsed (`counter_paths()`): each a tuple of keys, ``*`` any key."""


def counter_paths(paths: Iterable[str] | Counters | None) -> Counters:
    """Counter paths as `merge3()` takes them, from their declared spelling.

    Raises:
        ValueError: a path is empty or has an empty part (``"a..b"``).
    """
    if paths is None:
        return frozenset()
    if isinstance(paths, frozenset) and all(isinstance(p, tuple) for p in paths):
        return paths
    out: set[tuple[str, ...]] = set()
    for p in paths:
        if not isinstance(p, str):
            raise ValueError(f"counter path {p!r}: a string such as 'visits' or 'stats.steps'")
        text = p.strip()
        if text == "$":
            out.add(())
            continue
        if text.startswith("$."):
            text = text[2:]
        parts = tuple(text.split("."))
        if not text or any(not part for part in parts):
            raise ValueError(f"counter path {p!r}: dotted keys such as 'visits' or 'stats.steps', or '$'")
        out.add(parts)
    return frozenset(out)


def merge3(base: Any, ours: Any, theirs: Any, *, counters: Iterable[str] | Counters = frozenset()) -> Any:
    """``theirs`` with the changes from ``base`` to ``ours`` applied (see the module doc).
    A key absent on one side is passed as absent, not None: None is a value."""
    return _merge(base, ours, theirs, counter_paths(counters), ())


def _merge(base: Any, ours: Any, theirs: Any, counters: Counters, path: tuple[str, ...]) -> Any:
    if base is None or base is _ABSENT:
        if type(ours) is type(theirs) and type(ours) in (dict, list):
            base = type(ours)()  # nothing yet: both started from empty
        elif _counter(path, counters) and _number(ours) and _number(theirs):
            base = 0
    if _same(ours, base):
        return theirs
    if _same(theirs, base):
        return ours
    if _number(base) and _number(ours) and _number(theirs) and _counter(path, counters):
        return theirs + (ours - base)
    if isinstance(base, list) and isinstance(ours, list) and isinstance(theirs, list):
        return _merge_list(base, ours, theirs)
    if isinstance(base, dict) and isinstance(ours, dict) and isinstance(theirs, dict):
        merged: dict[str, Any] = {}
        for key in {**theirs, **ours}.keys() | base.keys():
            value = _merge(
                base.get(key, _ABSENT), ours.get(key, _ABSENT), theirs.get(key, _ABSENT), counters, (*path, key)
            )
            if value is not _ABSENT:
                merged[key] = value
        # the order the keys had: theirs first, then what ours added
        order = [k for k in theirs if k in merged] + [k for k in ours if k in merged and k not in theirs]
        return {k: merged[k] for k in order}
    return ours  # both changed it: the later save wins


def _merge_list(base: list[Any], ours: list[Any], theirs: list[Any]) -> list[Any]:
    """Theirs, less what ours removed from base, then what ours added (items compared as
    JSON; a repeated item counts once per occurrence)."""
    b, o = Counter(map(_item, base)), Counter(map(_item, ours))
    removed = b - o  # what ours dropped (trimmed, deleted)
    added = o - b  # what ours appended
    out = []
    for x in theirs:
        k = _item(x)
        if removed[k] > 0:
            removed[k] -= 1
            continue
        out.append(x)
    for x in ours:
        k = _item(x)
        if added[k] > 0:
            added[k] -= 1
            out.append(x)
    return out


def _item(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def _counter(path: tuple[str, ...], counters: Counters) -> bool:
    return any(len(c) == len(path) and all(a in ("*", b) for a, b in zip(c, path, strict=True)) for c in counters)


def _same(a: Any, b: Any) -> bool:
    if a is _ABSENT or b is _ABSENT:
        return a is b
    return type(a) is type(b) and a == b


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)

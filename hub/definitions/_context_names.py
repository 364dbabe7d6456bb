"""How a conversation's name ``TYPE:KEY`` splits into its context type and its key.

A key may hold colons (a Matrix room id ``!abc:example.org``) and so may a type
(``telegram:chat``): the name splits after the longest registered type that prefixes it,
never at a fixed colon. Names stored before this rule split the same way, so none is renamed.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["split_context_name"]


def split_context_name(name: str, types: Iterable[str]) -> tuple[str, str] | None:
    """``(TYPE, KEY)`` of the instance ``name`` by the longest of ``types`` that prefixes it
    followed by a colon and a non-empty key; None when no type does."""
    best: str | None = None
    for ctype in types:
        n = len(ctype)
        if ctype and len(name) > n + 1 and name[n] == ":" and name.startswith(ctype):
            if best is None or n > len(best):
                best = ctype
    return None if best is None else (best, name[len(best) + 1 :])

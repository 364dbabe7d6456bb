"""The tag grammar and the scanner under `hub.protocol`'s two parsers: the tag names,
the events and elements they report, the compiled patterns for a set of names, and the
incremental scanner (`_Scanner`) that turns chunks into tags and text. The parsers
themselves and their documentation are in ``_parser``.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, NamedTuple, TypeAlias

DEFAULT_TAGS: frozenset[str] = frozenset({"response", "reasoning", "think", "thinking", "action_call", "output"})
"""The names that are tags by default."""

RAW_TAGS: frozenset[str] = frozenset({"reasoning", "think", "thinking", "action_call", "output"})
"""Known elements whose content is text (other tags inside them are not parsed)."""

CONTAINER_TAGS: frozenset[str] = frozenset({"response"})
"""Known elements that ElementParser does not report: their direct text is stray text."""

DEFAULT_MAX_TAG_LENGTH = 4096


@dataclass(slots=True, frozen=True)
class StartEvent:
    """An opening tag of a known element (a self-closing tag gives Start then End)."""

    name: str
    attrs: dict[str, str]
    kind: Literal["start"] = field(default="start", init=False)


@dataclass(slots=True, frozen=True)
class TextEvent:
    """Text: content of the innermost open element, or stray text outside any."""

    text: str
    kind: Literal["text"] = field(default="text", init=False)


@dataclass(slots=True, frozen=True)
class EndEvent:
    """The end of an element; ``closed`` is False when the stream ended before its tag."""

    name: str
    closed: bool = True
    kind: Literal["end"] = field(default="end", init=False)


Event: TypeAlias = StartEvent | TextEvent | EndEvent


@dataclass(slots=True, frozen=True)
class Partial:
    """Content that arrived inside an open element reported live (`LiveParser`),
    since its previous report: the element's ``Partial`` texts, joined, are its content."""

    name: str
    attrs: dict[str, str]
    text: str
    kind: Literal["partial"] = field(default="partial", init=False)


@dataclass(slots=True, frozen=True)
class Element:
    """A whole element: its attributes and raw content (``closed=False``: cut off)."""

    name: str
    attrs: dict[str, str]
    content: str
    closed: bool = True
    kind: Literal["element"] = field(default="element", init=False)


# --- grammar -------------------------------------------------------------------------------

_ANAME = r"[^\W\d][\w.:-]*"
# A bare value may contain '/' but not end with it, so that `<x a=b/>` self-closes.
_BARE = r"""[^\s"'<>/]+(?:/+[^\s"'<>/]+)*"""
_VALUE = rf"""(?:"[^"]*"|'[^']*'|{_BARE})"""
# Models are sloppy with attributes, and a tag read as text loses the whole element: an
# attribute may have no value (`<output silent>`, read as "true"), and after a quoted value
# the next attribute may follow with no space (`type="a"chat="1"`). A separator is
# whitespace, or nothing right after a quote; the name itself still needs whitespace after
# it, so `<outputx>` stays text.
_ATTR = rf"{_ANAME}(?:\s*+=\s*+{_VALUE})?"
_SEP = r"""(?:\s++|(?<=["']))"""
_ATTR_PARTS = re.compile(rf"""({_ANAME})(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|({_BARE})))?""")
VALUELESS = "true"
"""The value of an attribute written without one (`<output silent>`)."""
_ENTITY = re.compile(r"&(quot|apos|lt|gt|amp);")
_ENTITIES = {"quot": '"', "apos": "'", "lt": "<", "gt": ">", "amp": "&"}


def _alternation(words: set[str]) -> str:
    # Longest first, so that `think` does not shadow `thinking`.
    return "|".join(re.escape(w) for w in sorted(words, key=lambda w: (-len(w), w)))


class _Grammar(NamedTuple):
    """What is a tag, for one set of names.

    `tag` matches one whole tag: group 1 the name of a closing tag, or group 2 the name,
    3 the attributes and 4 the self-closing slash of an opening one. `partial` fully
    matches every proper prefix of such a tag (and a little more, which only delays text),
    so that a chunk's suffix is held back exactly when it could still become a tag.
    `prefixes` holds the commonest of those prefixes (`<`, `</out`), for a lookup cheaper
    than the regex when text arrives a character at a time.
    """

    tag: re.Pattern[str]
    partial: re.Pattern[str]
    prefixes: frozenset[str]


@lru_cache(maxsize=64)
def _grammar(names: frozenset[str]) -> _Grammar:
    name = f"(?:{_alternation(set(names))})"
    prefix = f"(?:{_alternation({n[:k] for n in names for k in range(1, len(n) + 1)})})"
    tag = re.compile(rf"<(?:/({name})\s*+|({name})((?:{_SEP}{_ATTR})*+)\s*+(/)?)>")
    attr_tail = rf"""{_ANAME}(?:\s*(?:=\s*(?:"[^"]*|'[^']*|[^\s"'<>]*))?)?"""
    opening = rf"""{name}(?:{_SEP}{_ATTR})*(?:\s+(?:{attr_tail})?|(?<=["']){attr_tail}|\s*/)?"""
    partial = re.compile(rf"<(?:/{prefix}?|/{name}\s*|{prefix}?|{opening})")
    heads = {n[:k] for n in names for k in range(len(n) + 1)}
    return _Grammar(tag, partial, frozenset(f"<{h}" for h in heads) | {f"</{h}" for h in heads})


def _attrs(source: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for m in _ATTR_PARTS.finditer(source):
        key, dq, sq, bare = m.groups()
        value = dq if dq is not None else sq if sq is not None else bare if bare is not None else VALUELESS
        if "&" in value:
            value = _ENTITY.sub(lambda e: _ENTITIES[e.group(1)], value)
        attrs[key] = value
    return attrs


# --- the scanner ---------------------------------------------------------------------------


class _Scanner:
    """Tokenizer shared by both parsers; subclasses receive `_text`, `_start`, `_end`."""

    __slots__ = (
        "_tags",
        "_raw_tags",
        "_max",
        "_held",
        "_stack",
        "_raw",
        "_depth",
        "_mode",
        "_normal",
        "_decoder",
        "_closed",
    )

    def __init__(
        self,
        *,
        tags: frozenset[str] = DEFAULT_TAGS,
        raw_tags: frozenset[str] = RAW_TAGS,
        max_tag_length: int = DEFAULT_MAX_TAG_LENGTH,
    ) -> None:
        self._tags = frozenset(name for name in tags if name)
        self._raw_tags = frozenset(raw_tags) & self._tags
        self._max = max(int(max_tag_length), 3)
        self._held = ""  # a suffix that could still become a tag; always starts with '<'
        self._stack: list[str] = []  # names of open elements, innermost last
        self._raw: str | None = None  # name of the open raw element, if any
        self._depth = 0  # inner same-name elements open inside the raw element
        # The grammar in force: all tags, or only the open raw element's name.
        self._normal = self._mode = _grammar(self._tags) if self._tags else None
        self._decoder: codecs.IncrementalDecoder | None = None
        self._closed = False

    # Hooks, called in document order.
    def _text(self, text: str) -> None:
        raise NotImplementedError

    def _start(self, name: str, attrs: dict[str, str]) -> None:
        raise NotImplementedError

    def _end(self, name: str, closed: bool) -> None:
        raise NotImplementedError

    def _decode(self, chunk: bytes | bytearray | memoryview | str) -> str:
        decoder = self._decoder
        if isinstance(chunk, str):
            # Bytes cut mid-character, then a str: the cut character is lost, as replaced.
            if decoder is not None and decoder.getstate()[0]:
                chunk = decoder.decode(b"", final=True) + chunk
                decoder.reset()
            return chunk
        if decoder is None:
            decoder = self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return decoder.decode(chunk)

    def _scan(self, chunk: str) -> None:
        """Scan held-back text plus `chunk`, the slow path: `<` is involved."""
        mode = self._mode
        if mode is None:  # no known tags at all
            if chunk:
                self._text(chunk)
            return
        held = self._held
        if held:
            text = held + chunk
            # No '>' in the chunk: no tag can complete (one ending in `held` would have
            # matched already), so only check that the candidate is still viable.
            if ">" not in chunk and len(text) < self._max and mode.partial.fullmatch(text):
                self._held = text
                return
        else:
            text = chunk
        self._scan_text(text, mode)

    def _scan_text(self, text: str, mode: _Grammar) -> None:
        """Report the tags and the text in `text`, holding back a suffix that may become a tag."""
        tag_match = mode.tag.match
        limit = self._max
        n = len(text)
        start = pos = 0
        find = text.find
        while (i := find("<", pos)) >= 0:
            m = tag_match(text, i, i + limit)
            if m is None:
                if n - i < limit and mode.partial.fullmatch(text, i) is not None:
                    if i > start:
                        self._text(text[start:i])
                    self._held = text[i:]
                    return
                pos = i + 1
                continue
            pos = m.end()
            start = self._tag(m.groups(), text, start, i, pos)
            if (now := self._mode) is not mode and now is not None:  # a raw element opened or closed
                mode, tag_match = now, now.tag.match
        if start < n:
            self._text(text[start:] if start else text)
        self._held = ""

    def _tag(self, groups: tuple[str | None, ...], text: str, start: int, i: int, end: int) -> int:
        """Act on the tag from `i` to `end` (its pattern's `groups`), first reporting the text
        from `start` before it; returns where the next text starts: `end`, or `start` again
        when the tag is text after all."""
        closing, name, source, slash = groups
        if self._raw is not None:
            # Only the raw element's own name matches here; inner ones are counted, as text.
            if closing is None:
                if slash is None:
                    self._depth += 1
                return start
            if self._depth:
                self._depth -= 1
                return start
        elif closing is not None and not (self._stack and self._stack[-1] == closing):
            return start  # closes no open element: text
        if i > start:
            self._text(text[start:i])
        if closing is not None:
            self._stack.pop()
            if self._raw is not None:
                self._raw = None
                self._mode = self._normal
            self._end(closing, True)
            return end
        assert name is not None
        self._start(name, _attrs(source) if source else {})
        if slash is not None:
            self._end(name, True)
        else:
            self._stack.append(name)
            if name in self._raw_tags:
                self._raw = name
                self._depth = 0
                self._mode = _grammar(frozenset((name,)))
        return end

    def _finish(self) -> bool:
        """Flush everything at the end of the stream; False if already closed."""
        if self._closed:
            return False
        self._closed = True
        tail = self._held
        self._held = ""
        if self._decoder is not None:
            tail += self._decoder.decode(b"", final=True)
        if tail:
            self._text(tail)
        stack = self._stack
        while stack:
            self._end(stack.pop(), False)
        self._raw = None
        self._mode = self._normal
        return True

"""Streaming parser for the XML protocol that models answer in.

The model answers inside ``<response>`` with ``<reasoning>``/``<think>``/``<thinking>``,
``<action_call name=...>`` and ``<output type=...>`` elements. The reply arrives in chunks
split anywhere, and each element must be acted on as soon as its closing tag arrives, so
this parser is incremental, lenient and fast. It is usable on its own::

    from hub.parser import ElementParser, StreamParser, parse

    ep = ElementParser()
    for chunk in stream:                     # str, or UTF-8 bytes split anywhere
        for element in ep.feed(chunk):       # closed in this chunk, in order
            handle(element)                  # Element(name, attrs, content, closed)
    for element in ep.close():               # still open at the end: closed=False
        handle(element)
    if not ep.saw_tags:
        reply_with(ep.stray_text)            # a reply with no tags is plain text

    p = StreamParser()                       # the event level below ElementParser
    events = p.feed(chunk)                   # [StartEvent | TextEvent | EndEvent]
    events = p.close()                       # EndEvent(name, closed=False), innermost first

    parse(text)                              # feed the whole text, then close

    lp = LiveParser(live=frozenset({"output"}))   # also reports what an open <output> holds
    for item in lp.feed_live(chunk):         # Partial(name, attrs, text) | Element, in order
        ...                                  # an element's Partial texts, joined, are its content

Options (keyword-only, on every constructor and ``parse``): ``tags`` (the names that are
tags, ``DEFAULT_TAGS``), ``raw_tags`` (elements whose content is text, ``RAW_TAGS``),
``max_tag_length`` (4096); ElementParser and ``parse`` also take ``containers``
(``CONTAINER_TAGS``: known elements that are not reported, whose direct text is stray).
Events and elements are frozen dataclasses with a ``kind`` discriminator; ``Event`` is
their union.

Rules:

- Only names in ``tags`` are tags. Anything else that looks like markup (an unknown tag,
  ``<`` in prose or code, ``<br/>``) is text, character for character.
- Tag syntax: ``<name a="v" b='v' c=bare>``, ``</name>`` and self-closing ``<name .../>``
  (a start event and an end event). Whitespace may surround ``=`` and precede ``>`` (and
  follow the name of a closing tag); names are case-sensitive. A bare value has no
  quotes, whitespace, ``<`` or ``>`` and does not end in ``/``. Attribute values are raw,
  except that the five XML entities (``&quot; &apos; &lt; &gt; &amp;``) are decoded.
  Element content is never decoded.
- Elements in ``raw_tags`` hold text: once one is open, everything up to its matching
  closing tag is content, kept verbatim, other known tags included. Nesting is counted:
  inside ``<output>``, an inner ``<output ...>`` opens a level and its ``</output>``
  closes it, so an example element inside the content stays whole.
- Other known elements (``response``) are parsed as markup: their children are tags.
  ElementParser does not report containers; a known element that is neither raw nor a
  container is reported with its direct text as content (its children separately).
- A closing tag that does not close the innermost open element is text. Mis-nesting,
  invalid UTF-8 (decoded with ``errors="replace"``), NULs and lone surrogates never raise.
- Text streams out as soon as it is decidable: only a suffix that could still become a tag
  (``<``, ``<out``, ``<output name="a``, ``</act``) is held back until the next chunk.
  A candidate that reaches ``max_tag_length`` characters without becoming a tag is text,
  and so is a tag longer than that, whatever the split.
- The result does not depend on how the input is split: the same elements, and the same
  text per element, for any chunking (events may split text differently; adjacent text
  within one ``feed()`` is one ``TextEvent``).
- ``close()`` flushes held-back text as text and ends every open element with
  ``closed=False``. It is idempotent; ``feed()`` after ``close()`` returns ``[]``.
- `LiveParser` (an ElementParser) also reports the content of an open element named
  in ``live`` (raw elements only) as it arrives: ``feed_live()``/``close_live()`` return
  `Partial` reports and elements in document order, each element after its last
  ``Partial``. A ``feed_live()`` gives at most one ``Partial`` per element; the reports'
  texts joined are the element's content, for any chunking. Held-back text (``</out``) is
  reported once it is known to be text. Its ``feed()``/``close()`` return elements only.

The tag names, events, elements and the scanner under both parsers are in ``_scanner``.
"""

from __future__ import annotations

from ._scanner import (
    CONTAINER_TAGS,
    DEFAULT_MAX_TAG_LENGTH,
    DEFAULT_TAGS,
    RAW_TAGS,
    Element,
    EndEvent,
    Event,
    Partial,
    StartEvent,
    TextEvent,
    _Scanner,
)

__all__ = ["ElementParser", "LiveParser", "StreamParser", "parse"]


class StreamParser(_Scanner):
    """Incremental tokenizer: chunks in, start / text / end events out.

    Keyword options: ``tags`` (names that are tags), ``raw_tags`` (elements whose content
    is text), ``max_tag_length`` (longest tag; a longer candidate is text).
    """

    __slots__ = ("_events", "_pending")

    def __init__(
        self,
        *,
        tags: frozenset[str] = DEFAULT_TAGS,
        raw_tags: frozenset[str] = RAW_TAGS,
        max_tag_length: int = DEFAULT_MAX_TAG_LENGTH,
    ) -> None:
        super().__init__(tags=tags, raw_tags=raw_tags, max_tag_length=max_tag_length)
        self._events: list[Event] = []
        self._pending: list[str] = []

    def feed(self, chunk: str | bytes) -> list[Event]:
        """Events that ``chunk`` completes; bytes are UTF-8, split anywhere."""
        if chunk.__class__ is not str or self._decoder is not None:
            chunk = self._decode(chunk)
        if self._closed:
            return []
        held = self._held
        if not held:
            if "<" not in chunk:
                return [TextEvent(chunk)] if chunk else []
        elif (mode := self._mode) is not None and held + chunk in mode.prefixes:  # a tag name arriving bit by bit
            self._held = held + chunk
            return []
        events: list[Event] = []
        self._events = events
        self._scan(chunk)
        self._flush()
        return events

    def close(self) -> list[Event]:
        """Flush held-back text and end every open element (``closed=False``)."""
        events: list[Event] = []
        self._events = events
        if self._finish():
            self._flush()
        return events

    def _flush(self) -> None:
        if self._pending:
            self._events.append(TextEvent("".join(self._pending)))
            self._pending.clear()

    def _text(self, text: str) -> None:
        self._pending.append(text)

    def _start(self, name: str, attrs: dict[str, str]) -> None:
        self._flush()
        self._events.append(StartEvent(name, attrs))

    def _end(self, name: str, closed: bool) -> None:
        self._flush()
        self._events.append(EndEvent(name, closed))


class ElementParser(_Scanner):
    """Incremental parser that assembles whole elements, which is what the engine acts on.

    Same keyword options as StreamParser, plus ``containers``: known elements whose
    children are elements and which are not reported themselves (``response``).
    Content of a non-raw, non-container element is its direct text only.
    """

    __slots__ = ("_containers", "_open", "_parts", "_stray", "_elements", "_saw")

    def __init__(
        self,
        *,
        tags: frozenset[str] = DEFAULT_TAGS,
        raw_tags: frozenset[str] = RAW_TAGS,
        containers: frozenset[str] = CONTAINER_TAGS,
        max_tag_length: int = DEFAULT_MAX_TAG_LENGTH,
    ) -> None:
        super().__init__(tags=tags, raw_tags=raw_tags, max_tag_length=max_tag_length)
        self._containers = frozenset(containers) - self._raw_tags
        self._stray: list[str] = []
        self._parts = self._stray  # where text goes now
        # One (attrs, parts) per open element, parallel to the scanner's stack; parts is
        # None for a container, whose text is stray.
        self._open: list[tuple[dict[str, str], list[str] | None]] = []
        self._elements: list[Element] = []
        self._saw = False

    @property
    def saw_tags(self) -> bool:
        """True once any known tag has been seen."""
        return self._saw

    @property
    def stray_text(self) -> str:
        """Text outside every reported element: at top level and directly in containers."""
        stray = self._stray
        if len(stray) > 1:
            stray[:] = ["".join(stray)]
        return stray[0] if stray else ""

    def feed(self, chunk: str | bytes) -> list[Element]:
        """Elements whose closing tag arrived in ``chunk``, in order."""
        if chunk.__class__ is not str or self._decoder is not None:
            chunk = self._decode(chunk)
        if self._closed:
            return []
        held = self._held
        if not held:
            if "<" not in chunk:
                if chunk:
                    self._parts.append(chunk)
                return []
        elif (mode := self._mode) is not None and held + chunk in mode.prefixes:  # a tag name arriving bit by bit
            self._held = held + chunk
            return []
        elements: list[Element] = []
        self._elements = elements
        self._scan(chunk)
        return elements

    def close(self) -> list[Element]:
        """Elements still open at the end of the stream, innermost first, ``closed=False``."""
        elements: list[Element] = []
        self._elements = elements
        self._finish()
        return elements

    def _text(self, text: str) -> None:
        self._parts.append(text)

    def _start(self, name: str, attrs: dict[str, str]) -> None:
        self._saw = True
        if name in self._containers:
            self._open.append((attrs, None))
            self._parts = self._stray
        else:
            parts: list[str] = []
            self._open.append((attrs, parts))
            self._parts = parts

    def _end(self, name: str, closed: bool) -> None:
        attrs, parts = self._open.pop()
        outer = self._open[-1][1] if self._open else None
        self._parts = self._stray if outer is None else outer
        if parts is not None:
            self._elements.append(Element(name, attrs, "".join(parts), closed))


class LiveParser(ElementParser):
    """An ElementParser that also reports, as `Partial`, the content of an open element
    named in ``live`` as it arrives (an output delivered while the model writes it).

    Only raw elements are reported live (their content is text, and only one is open at a
    time); ``live`` names that are not raw tags are ignored.
    """

    __slots__ = ("_live", "_out", "_report", "_pending")

    def __init__(
        self,
        *,
        live: frozenset[str] = frozenset({"output"}),
        tags: frozenset[str] = DEFAULT_TAGS,
        raw_tags: frozenset[str] = RAW_TAGS,
        containers: frozenset[str] = CONTAINER_TAGS,
        max_tag_length: int = DEFAULT_MAX_TAG_LENGTH,
    ) -> None:
        super().__init__(tags=tags, raw_tags=raw_tags, containers=containers, max_tag_length=max_tag_length)
        self._live = frozenset(live) & self._raw_tags
        self._out: list[Element | Partial] = []
        self._report: tuple[str, dict[str, str]] | None = None  # the open live element
        self._pending: list[str] = []  # its text since the last report

    def feed_live(self, chunk: str | bytes) -> list[Element | Partial]:
        """Reports and elements that ``chunk`` completes, in document order."""
        if chunk.__class__ is not str or self._decoder is not None:
            chunk = self._decode(chunk)
        if self._closed:
            return []
        out: list[Element | Partial] = []
        self._out = out
        held = self._held
        if not held:
            if "<" not in chunk:
                if chunk:
                    self._parts.append(chunk)
                    if self._report is not None:
                        out.append(Partial(self._report[0], self._report[1], chunk))
                return out
        elif (mode := self._mode) is not None and held + chunk in mode.prefixes:
            self._held = held + chunk
            return out
        self._scan(chunk)
        self._report_pending()
        return out

    def close_live(self) -> list[Element | Partial]:
        """The rest of an open live element's content, then what is still open (``closed=False``)."""
        out: list[Element | Partial] = []
        self._out = out
        self._finish()
        return out

    def feed(self, chunk: str | bytes) -> list[Element]:
        return [x for x in self.feed_live(chunk) if isinstance(x, Element)]

    def close(self) -> list[Element]:
        return [x for x in self.close_live() if isinstance(x, Element)]

    def _report_pending(self) -> None:
        if self._pending and self._report is not None:
            self._out.append(Partial(self._report[0], self._report[1], "".join(self._pending)))
        self._pending.clear()

    def _text(self, text: str) -> None:
        self._parts.append(text)
        if self._report is not None:
            self._pending.append(text)

    def _start(self, name: str, attrs: dict[str, str]) -> None:
        super()._start(name, attrs)
        if name in self._live:  # a raw element: nothing opens inside it until it ends
            self._report = (name, attrs)

    def _end(self, name: str, closed: bool) -> None:
        self._report_pending()
        self._report = None  # nothing opens inside a raw element: what ends is the live one, if any
        scratch: list[Element] = []
        self._elements = scratch
        super()._end(name, closed)
        self._out.extend(scratch)


def parse(
    text: str | bytes,
    *,
    tags: frozenset[str] = DEFAULT_TAGS,
    raw_tags: frozenset[str] = RAW_TAGS,
    containers: frozenset[str] = CONTAINER_TAGS,
    max_tag_length: int = DEFAULT_MAX_TAG_LENGTH,
) -> list[Element]:
    """Parse a whole reply: every element, open ones last with ``closed=False``."""
    parser = ElementParser(tags=tags, raw_tags=raw_tags, containers=containers, max_tag_length=max_tag_length)
    return parser.feed(text) + parser.close()

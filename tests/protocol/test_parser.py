"""Tests for hub.parser: one test per rule, then properties over generated documents."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hub.protocol import (
    DEFAULT_TAGS,
    RAW_TAGS,
    Element,
    ElementParser,
    EndEvent,
    LiveParser,
    Partial,
    StartEvent,
    StreamParser,
    TextEvent,
    parse,
)


def events(*chunks: str | bytes, **options) -> list:
    parser = StreamParser(**options)
    out = []
    for chunk in chunks:
        out += parser.feed(chunk)
    return out + parser.close()


def merged(evs: list) -> list:
    """Events with adjacent text joined, so that splits do not matter."""
    out: list = []
    for ev in evs:
        if isinstance(ev, TextEvent) and out and isinstance(out[-1], TextEvent):
            out[-1] = TextEvent(out[-1].text + ev.text)
        elif not (isinstance(ev, TextEvent) and not ev.text):
            out.append(ev)
    return out


def text_of(evs: list) -> str:
    return "".join(ev.text for ev in evs if isinstance(ev, TextEvent))


def elements(*chunks: str | bytes, **options) -> tuple[list[Element], ElementParser]:
    parser = ElementParser(**options)
    out: list[Element] = []
    for chunk in chunks:
        out += parser.feed(chunk)
    return out + parser.close(), parser


# --- data types ----------------------------------------------------------------------------


def test_dataclasses_have_kind_discriminators_and_are_frozen():
    assert StartEvent("output", {}).kind == "start"
    assert TextEvent("x").kind == "text"
    assert EndEvent("output").kind == "end"
    assert EndEvent("output").closed is True
    assert Element("output", {}, "x").kind == "element"
    assert Element("output", {}, "x").closed is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        TextEvent("x").text = "y"  # type: ignore[misc]
    assert not hasattr(TextEvent("x"), "__dict__")


def test_events_match_exhaustively():
    seen = []
    for ev in events('<output type="t">hi</output>'):
        match ev:
            case StartEvent(name=name, attrs=attrs):
                seen.append(("start", name, attrs))
            case TextEvent(text=text):
                seen.append(("text", text))
            case EndEvent(name=name, closed=closed):
                seen.append(("end", name, closed))
    assert seen == [("start", "output", {"type": "t"}), ("text", "hi"), ("end", "output", True)]


def test_default_tag_sets():
    assert DEFAULT_TAGS == {"response", "reasoning", "think", "thinking", "action_call", "output"}
    assert RAW_TAGS == DEFAULT_TAGS - {"response"}


# --- the protocol --------------------------------------------------------------------------

REPLY = (
    "<response>\n"
    "  <reasoning>The user wants the weather; call the action.</reasoning>\n"
    '  <action_call name="getWeather">{"location": "New York City"}</action_call>\n'
    '  <output type="telegram:send">It is 72°F and sunny in NYC.</output>\n'
    "</response>"
)


def test_design_example():
    result, parser = elements(REPLY)
    assert result == [
        Element("reasoning", {}, "The user wants the weather; call the action."),
        Element("action_call", {"name": "getWeather"}, '{"location": "New York City"}'),
        Element("output", {"type": "telegram:send"}, "It is 72°F and sunny in NYC."),
    ]
    assert parser.saw_tags
    assert parser.stray_text.strip() == ""
    assert parse(REPLY) == result


def test_elements_are_returned_by_the_feed_that_closes_them():
    parser = ElementParser()
    assert parser.feed("<response><think>a") == []
    assert parser.feed("b</thi") == []
    assert parser.feed("nk><output>c</output>") == [
        Element("think", {}, "ab"),
        Element("output", {}, "c"),
    ]
    assert parser.close() == []


def test_think_and_thinking_are_distinct_names():
    assert parse("<thinking>a</thinking><think>b</think>") == [
        Element("thinking", {}, "a"),
        Element("think", {}, "b"),
    ]
    # `<thinking>` does not close a `<think>`; inside a raw element it is text.
    assert parse("<think>a</thinking>b</think>") == [Element("think", {}, "a</thinking>b")]


# --- text that only looks like a tag -------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "a < b and c<d",
        "if x<y>z: pass",
        "<<",
        "<< >> </ <> < / >",
        "line<br/>break",
        '<div class="x"><b>bold</b></div>',
        "<Output>case matters</Output>",
        "<outputs>plural</outputs>",
        "<output_x>",
        "<output-x/>",
        "< output>",
        "</output>",
        "</response>",
        "<response",
        '<output a="unterminated',
        "x</",
        "<",
    ],
)
def test_text_that_only_looks_like_a_tag_stays_text(text):
    evs = events(text)
    assert all(isinstance(ev, TextEvent) for ev in evs)
    assert text_of(evs) == text
    result, parser = elements(*text)
    assert result == []
    assert parser.stray_text == text
    assert not parser.saw_tags


@pytest.mark.parametrize(
    ("text", "attrs"),
    [
        ('<output type="text" silent>hi</output>', {"type": "text", "silent": "true"}),
        ('<output type="a"chat="1">hi</output>', {"type": "a", "chat": "1"}),
        ("<output silent type='t'>hi</output>", {"silent": "true", "type": "t"}),
        ('<output a="1"b c=d>hi</output>', {"a": "1", "b": "true", "c": "d"}),
        ('<output  type = "q" >hi</output>', {"type": "q"}),
    ],
)
def test_sloppy_attributes_are_read_leniently_not_turned_into_text(text, attrs):
    """A valueless attribute or a missing space after a quote must not lose the element
    (issue 16, item 12): at every chunking, bytes or str, the element and its attributes come out."""
    for size in range(1, len(text) + 1):
        for source in (text, text.encode()):
            parser = ElementParser()
            got = []
            for i in range(0, len(source), size):
                got += parser.feed(source[i : i + size])
            got += parser.close()
            assert got == [Element("output", attrs, "hi")], (size, type(source))
            assert parser.stray_text == ""


@pytest.mark.parametrize("text", ["<output attr", '<output a="1"b="2"', "<outputx silent>", "<output=x>"])
def test_sloppy_tags_that_never_close_or_name_nothing_stay_text(text):
    result, parser = elements(*text)
    assert result == []
    assert parser.stray_text == text


def test_unknown_tags_inside_a_raw_element_are_content():
    assert parse("<output>a <b>bold</b> & x<y</output>") == [Element("output", {}, "a <b>bold</b> & x<y")]


def test_known_tags_inside_a_raw_element_are_content():
    assert parse("<reasoning>use <output>hi</output> then <think/></reasoning>") == [
        Element("reasoning", {}, "use <output>hi</output> then <think/>")
    ]


def test_text_events_within_one_feed_are_coalesced():
    parser = StreamParser()
    assert parser.feed("a<b>c < d") == [TextEvent("a<b>c < d")]
    assert parser.feed("<output>x<y>z</output>") == [
        StartEvent("output", {}),
        TextEvent("x<y>z"),
        EndEvent("output"),
    ]


# --- tag syntax ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "attrs"),
    [
        ('<output type="telegram:send">', {"type": "telegram:send"}),
        ("<output type='x' to=\"y\">", {"type": "x", "to": "y"}),
        ("<output type=bare>", {"type": "bare"}),
        ("<output url=http://x.y/z?a=1>", {"url": "http://x.y/z?a=1"}),
        ("<output  type = \"x\"   name=\t'y'  >", {"type": "x", "name": "y"}),
        ('<output a="it&apos;s &quot;q&quot; &lt;b&gt; &amp;">', {"a": 'it\'s "q" <b> &'}),
        ("<output a='&amp;lt;'>", {"a": "&lt;"}),
        ('<output a="&nbsp;&#39;&unknown">', {"a": "&nbsp;&#39;&unknown"}),
        ('<output a="it\'s" b=\'say "hi"\'>', {"a": "it's", "b": 'say "hi"'}),
        ('<output a="x>y" b="<c>">', {"a": "x>y", "b": "<c>"}),
        ('<output data-x="1" x:y="2" _z="3">', {"data-x": "1", "x:y": "2", "_z": "3"}),
        ('<output a="1" a="2">', {"a": "2"}),
        ('<output a="">', {"a": ""}),
        ("<output>", {}),
        ("<output >", {}),
    ],
)
def test_attributes(tag, attrs):
    text = f"{tag}c&amp;</output>"
    expected = [Element("output", attrs, "c&amp;")]
    assert parse(text) == expected
    assert elements(*text)[0] == expected


def test_self_closing_gives_start_and_end():
    assert events('<output type="x"/>') == [
        StartEvent("output", {"type": "x"}),
        EndEvent("output"),
    ]
    assert parse('<response><output type="x" /><output a=b/></response>') == [
        Element("output", {"type": "x"}, ""),
        Element("output", {"a": "b"}, ""),
    ]


def test_closing_tag_may_have_space_before_gt():
    assert parse("<think>a</think >") == [Element("think", {}, "a")]


# --- raw elements and nesting --------------------------------------------------------------


def test_raw_content_keeps_nested_same_name_elements_whole():
    text = (
        '<output type="doc">Example: <output type="x">inner</output> and '
        "<output>deeper <output>still</output></output> end</output>after"
    )
    result, parser = elements(text)
    assert result == [
        Element(
            "output",
            {"type": "doc"},
            'Example: <output type="x">inner</output> and <output>deeper <output>still</output></output> end',
        )
    ]
    assert parser.stray_text == "after"


def test_self_closing_inner_tag_does_not_change_depth():
    assert parse("<output>a<output/>b</output>c") == [Element("output", {}, "a<output/>b")]


def test_response_is_a_container():
    result, parser = elements("<response>hi <think>t</think> there</response>")
    assert result == [Element("think", {}, "t")]
    assert parser.stray_text == "hi  there"


def test_unbalanced_inner_open_tag_leaves_element_unclosed():
    assert parse("<output>a <output> b</output>") == [Element("output", {}, "a <output> b</output>", closed=False)]


# --- mis-nesting and stray closing tags ----------------------------------------------------


def test_stray_closing_tags_are_text():
    result, parser = elements("</think>a<response></output>b</response></response>")
    assert result == []
    assert parser.stray_text == "</think>a</output>b</response>"


def test_closing_an_outer_element_from_inside_a_raw_one_is_content():
    assert parse("<response><output>a</response>b</output></response>") == [Element("output", {}, "a</response>b")]


def test_custom_non_raw_element_holds_direct_text_and_children():
    tags = frozenset({"response", "step", "think"})
    result, _ = elements("<step n=1>a<think>t</think>b</step>", tags=tags, raw_tags=frozenset({"think"}))
    assert result == [Element("think", {}, "t"), Element("step", {"n": "1"}, "ab")]


def test_response_is_reported_when_not_a_container():
    result, parser = elements("a<response>b<think>t</think>c</response>", containers=frozenset())
    assert result == [Element("think", {}, "t"), Element("response", {}, "bc")]
    assert parser.stray_text == "a"


def test_empty_tag_name_is_ignored():
    assert events("<>x</>", tags=frozenset({""}), raw_tags=frozenset()) == [TextEvent("<>x</>")]


def test_custom_tags_only_those_are_tags():
    tags = frozenset({"note"})
    assert parse("<note>x</note><output>y</output>", tags=tags, raw_tags=tags) == [Element("note", {}, "x")]
    assert events("<output>y</output>", tags=frozenset(), raw_tags=frozenset()) == [TextEvent("<output>y</output>")]


# --- end of stream -------------------------------------------------------------------------


def test_unclosed_elements_are_reported_at_close():
    parser = StreamParser()
    assert parser.feed("<response><output type=x>partial") == [
        StartEvent("response", {}),
        StartEvent("output", {"type": "x"}),
        TextEvent("partial"),
    ]
    assert parser.close() == [EndEvent("output", closed=False), EndEvent("response", closed=False)]
    assert parser.close() == []
    assert parser.feed("more</output>") == []

    result, _ = elements("<response><output type=x>partial")
    assert result == [Element("output", {"type": "x"}, "partial", closed=False)]


def test_close_flushes_a_held_back_candidate_as_text():
    parser = ElementParser()
    assert parser.feed('<output>a</output>b<output name="x') == [Element("output", {}, "a")]
    assert parser.close() == []
    assert parser.stray_text == 'b<output name="x'
    assert parser.feed("<output>late</output>") == []


def test_close_flushes_held_candidate_into_open_element():
    assert parse("<think>so </thi") == [Element("think", {}, "so </thi", closed=False)]


# --- holding back --------------------------------------------------------------------------


def test_only_a_possible_tag_is_held_back():
    parser = StreamParser()
    assert parser.feed("hello <") == [TextEvent("hello ")]
    assert parser.feed(" b") == [TextEvent("< b")]
    assert parser.feed("<out") == []
    assert parser.feed("x") == [TextEvent("<outx")]
    assert parser.feed('<output name="a') == []
    assert parser.feed('b">') == [StartEvent("output", {"name": "ab"})]
    assert parser.feed("body <thi") == [TextEvent("body <thi")]  # not a tag inside output
    assert parser.feed("</outp") == []
    assert parser.feed("ut>") == [EndEvent("output")]
    assert parser.feed("<action_call>x</act") == [StartEvent("action_call", {}), TextEvent("x")]
    assert parser.feed("ually") == [TextEvent("</actually")]


@pytest.mark.parametrize(
    "candidate",
    [
        "<",
        "<o",
        "<output",
        "<output ",
        "<output a",
        "<output a =",
        '<output a="x',
        "<output a='",
        "<output a=b",
        '<output a="1"',
        '<output a="1" ',
        "<output/",
        "</",
        "</o",
        "</output",
        "</output ",
        "<output a=b//",
    ],
)
def test_prefixes_of_tags_are_held_back(candidate):
    parser = StreamParser()
    parser.feed("<response>")
    assert parser.feed("text" + candidate) == [TextEvent("text")]


def test_max_tag_length_makes_long_candidates_text_in_any_split():
    tag = '<output name="' + "a" * 40 + '">'
    text = tag + "x</output>"
    whole, _ = elements(text, max_tag_length=32)
    split, parser = elements(*text, max_tag_length=32)
    assert whole == split == []
    assert parser.stray_text == text
    assert parse(text, max_tag_length=len(tag)) == [Element("output", {"name": "a" * 40}, "x")]
    assert parse(text, max_tag_length=len(tag) - 1) == []


def test_feeding_one_character_at_a_time_is_equivalent():
    assert elements(*REPLY)[0] == parse(REPLY)
    assert merged(events(*REPLY)) == merged(events(REPLY))


# --- bytes and odd input -------------------------------------------------------------------


def test_bytes_split_inside_multibyte_characters():
    text = '<output type="é">72°F ☀️ 😀 naïve</output>'
    data = text.encode()
    result, _ = elements(*(data[i : i + 1] for i in range(len(data))))
    assert result == [Element("output", {"type": "é"}, "72°F ☀️ 😀 naïve")]
    parser = StreamParser()
    assert parser.feed(b"<think>" + "😀".encode()[:2]) == [StartEvent("think", {})]
    assert parser.feed("😀".encode()[2:]) == [TextEvent("😀")]


def test_invalid_utf8_is_replaced():
    assert parse(b"<think>a\xff\xfeb</think>") == [Element("think", {}, "a\ufffd\ufffdb")]
    assert parse(b"<think>cut \xf0\x9f") == [Element("think", {}, "cut \ufffd", closed=False)]


def test_str_after_bytes_cut_mid_character():
    parser = ElementParser()
    parser.feed(b"a\xc3")
    parser.feed("b")
    parser.close()
    assert parser.stray_text == "a\ufffdb"


def test_nul_and_lone_surrogates_pass_through():
    text = "\x00<think>\ud800x\x00</think>\udfff"
    result, parser = elements(*text)
    assert result == [Element("think", {}, "\ud800x\x00")]
    assert parser.stray_text == "\x00\udfff"


def test_plain_reply_without_tags():
    result, parser = elements("It is ", "sunny; 3 < 4.")
    assert result == []
    assert not parser.saw_tags
    assert parser.stray_text == "It is sunny; 3 < 4."


def test_saw_tags_is_set_by_any_known_tag():
    parser = ElementParser()
    parser.feed("hi <b>")
    assert not parser.saw_tags
    parser.feed("<response>")
    assert parser.saw_tags
    assert parse("<output/>") == [Element("output", {}, "")]


# --- properties ----------------------------------------------------------------------------

# Prose that can never form a known tag: letters only come from whole fragments, and no
# fragment starts with a letter that could follow '<' into a known name.
_PROSE_CHARS = st.sampled_from(list(" <>/=\"'&;!\n\t0123456789{}[]:,é°€😀\u200b\x00"))
_FRAGMENTS = st.sampled_from(
    [
        "a < b",
        "if x<y>z",
        "<br/>",
        '<div class="x">',
        "</div>",
        "<<",
        "</",
        "<>",
        "< output>",
        "<Output>",
        "<outputs>",
        "</outputx>",
        "<thinker>",
        "<out of",
        "<action_callx/>",
        "&amp;",
        "&lt;",
        "<respons e>",
        "x</",
        '<unknown a="1">',
    ]
)
prose = st.lists(st.one_of(_FRAGMENTS, st.text(_PROSE_CHARS, max_size=6)), max_size=5).map("".join)

_ATTR_NAMES = st.sampled_from(["name", "type", "to", "data-x", "x:y"])
_ATTR_VALUES = st.text(st.sampled_from(list("ab <>/&'\"=é😀")), max_size=6)


@st.composite
def attribute(draw) -> tuple[str, str, str]:
    """(source, name, decoded value)."""
    name = draw(_ATTR_NAMES)
    value = draw(_ATTR_VALUES)
    style = draw(st.sampled_from(["dq", "sq", "bare"]))
    amp = value.replace("&", "&amp;")
    if style == "bare" and value and value.isalnum():
        quoted = value
    elif style == "sq":
        quoted = "'" + amp.replace("'", "&apos;") + "'"
    else:
        quoted = '"' + amp.replace('"', "&quot;") + '"'
    eq = draw(st.sampled_from(["=", " = ", "=\t"]))
    return f"{draw(st.sampled_from([' ', '  ', chr(10)]))}{name}{eq}{quoted}", name, value


@st.composite
def start_tag(draw, name: str) -> tuple[str, dict[str, str]]:
    attrs = draw(st.lists(attribute(), max_size=2))
    return f"<{name}{''.join(a[0] for a in attrs)}{draw(st.sampled_from(['', ' ']))}", {a[1]: a[2] for a in attrs}


@st.composite
def raw_content(draw, name: str, depth: int = 0) -> str:
    """Content of a raw element: prose, other known tags, balanced same-name elements."""
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["prose", "other", "nested"] if depth < 2 else ["prose"]))
        if kind == "prose":
            parts.append(draw(prose))
        elif kind == "other":
            other = draw(st.sampled_from(sorted(DEFAULT_TAGS - {name})))
            parts.append(f"<{other}>{draw(prose)}</{other}>")
        else:
            head, _ = draw(start_tag(name))
            parts.append(f"{head}>{draw(raw_content(name, depth + 1))}</{name}>")
    return "".join(parts)


@st.composite
def element(draw) -> tuple[str, Element]:
    name = draw(st.sampled_from(sorted(RAW_TAGS)))
    head, attrs = draw(start_tag(name))
    if draw(st.booleans()) and draw(st.booleans()):
        return head + "/>", Element(name, attrs, "")
    content = draw(raw_content(name))
    return f"{head}>{content}</{name}>", Element(name, attrs, content)


@st.composite
def document(draw) -> tuple[str, list[Element], str]:
    """(text, expected elements, expected stray text)."""
    text, expected, stray = [], [], []
    wrap = draw(st.booleans())
    if wrap:
        text.append("<response>")
    for _ in range(draw(st.integers(0, 4))):
        p = draw(prose)
        text.append(p)
        stray.append(p)
        source, el = draw(element())
        text.append(source)
        expected.append(el)
    p = draw(prose)
    text.append(p)
    stray.append(p)
    if wrap:
        text.append("</response>")
    return "".join(text), expected, "".join(stray)


def split(data, cuts: list[int]) -> list:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


_CUTS = st.lists(st.integers(0, 10_000), max_size=40)


@settings(max_examples=150, deadline=None)
@given(document(), _CUTS, st.booleans())
def test_generated_documents_parse_the_same_in_any_split(doc, cuts, as_bytes):
    text, expected, stray = doc
    data = text.encode() if as_bytes else text
    whole, whole_parser = elements(data)
    assert whole == expected
    assert whole_parser.stray_text == stray
    assert whole_parser.saw_tags == (bool(expected) or text.startswith("<response>"))
    pieces, parser = elements(*split(data, cuts))
    assert pieces == expected
    assert parser.stray_text == stray
    assert merged(events(*split(data, cuts))) == merged(events(data))


@settings(max_examples=60, deadline=None)
@given(document(), st.integers(0, 10_000))
def test_truncated_documents_report_open_elements(doc, cut):
    text = doc[0][: cut % (len(doc[0]) + 1)]
    whole, _ = elements(text)
    assert elements(*text)[0] == whole
    assert all(el.closed for el in whole[:-1])


# Near-tags: the letters of the known names and the punctuation of tags, plus anything.
_NEAR = st.text(st.one_of(st.sampled_from(list("<</>=\"' _actionputrsehkgz")), st.characters()), max_size=80)


def _has_known_tag(text: str) -> bool:
    return any(f"<{n}" in text or f"</{n}" in text for n in DEFAULT_TAGS)


@settings(max_examples=200, deadline=None)
@given(_NEAR, _CUTS)
def test_text_without_known_tags_round_trips_exactly(text, cuts):
    assume(not _has_known_tag(text))
    evs = events(*split(text, cuts))
    assert all(isinstance(ev, TextEvent) for ev in evs)
    assert text_of(evs) == text


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=80), _CUTS)
def test_arbitrary_bytes_never_raise_and_decode_like_the_whole(data, cuts):
    decoded = data.decode("utf-8", errors="replace")
    evs = events(*split(data, cuts))
    if not _has_known_tag(decoded):
        assert text_of(evs) == decoded
    assert merged(evs) == merged(events(data))
    elements(*split(data, cuts))


def _well_formed(evs: list) -> None:
    stack = []
    for ev in evs:
        if isinstance(ev, StartEvent):
            stack.append(ev.name)
        elif isinstance(ev, EndEvent):
            assert stack.pop() == ev.name
    assert stack == []


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["<output>", "</output>", "<response>", "</response>", "<think/>", "</think>", "<think a='", "'>", '"', "<"]
        )
        | st.characters(),
        max_size=30,
    ).map("".join)
    | st.text(),
    _CUTS,
)
def test_arbitrary_text_never_raises_and_events_nest(text, cuts):
    evs = events(*split(text, cuts))
    _well_formed(evs)
    assert merged(evs) == merged(events(text))
    result, parser = elements(*split(text, cuts))
    assert result == elements(text)[0]
    parser.stray_text  # noqa: B018


# --- live reports (LiveParser) -------------------------------------------------------------


def live_items(*chunks: str | bytes, **options) -> list:
    parser = LiveParser(**options)
    out: list = []
    for chunk in chunks:
        out += parser.feed_live(chunk)
    return out + parser.close_live()


def test_live_parser_reports_open_output_content_as_it_arrives():
    parser = LiveParser()
    assert parser.feed_live('<response><output type="t" to="x">Hel') == [
        Partial("output", {"type": "t", "to": "x"}, "Hel")
    ]
    assert parser.feed_live("lo wor") == [Partial("output", {"type": "t", "to": "x"}, "lo wor")]
    # `</out` could still close it: held back, then reported once known to be text
    assert parser.feed_live("ld </out") == [Partial("output", {"type": "t", "to": "x"}, "ld ")]
    assert parser.feed_live("side> ok</output><think>x</think>") == [
        Partial("output", {"type": "t", "to": "x"}, "</outside> ok"),
        Element("output", {"type": "t", "to": "x"}, "Hello world </outside> ok"),
        Element("think", {}, "x"),
    ]
    assert parser.close_live() == []


def test_live_parser_reports_only_live_elements_and_its_feed_gives_elements_only():
    assert live_items("<think>a</think><action_call name='x'>{}</action_call>") == [
        Element("think", {}, "a"),
        Element("action_call", {"name": "x"}, "{}"),
    ]
    parser = LiveParser()
    assert parser.feed("<output>ab") == []
    assert parser.feed("c</output>") == [Element("output", {}, "abc")]


def test_live_parser_reports_a_cut_off_element_before_it_ends_open():
    assert live_items("<output>abc", "</outp") == [
        Partial("output", {}, "abc"),
        Partial("output", {}, "</outp"),
        Element("output", {}, "abc</outp", closed=False),
    ]


def _check_live(items: list, expected: list[Element]) -> None:
    """Every element's Partial texts, joined, are its content, and come before it."""
    elements_seen, pending = [], []
    for item in items:
        if isinstance(item, Partial):
            assert item.text
            pending.append(item)
        else:
            if item.name == "output":
                assert all(p.name == "output" and p.attrs == item.attrs for p in pending)
                assert "".join(p.text for p in pending) == item.content
            else:
                assert pending == []
            pending = []
            elements_seen.append(item)
    assert pending == []
    assert elements_seen == expected


@settings(max_examples=80, deadline=None)
@given(document(), _CUTS, st.booleans())
def test_live_reports_join_to_the_content_in_any_split(doc, cuts, as_bytes):
    text, expected, _ = doc
    data = text.encode() if as_bytes else text
    items = live_items(*split(data, cuts))
    _check_live(items, expected)
    parser = LiveParser()
    per_feed = [parser.feed_live(c) for c in split(data, cuts)]
    assert all(sum(isinstance(x, Partial) for x in f) <= 1 + sum(isinstance(x, Element) for x in f) for f in per_feed)


@settings(max_examples=40, deadline=None)
@given(document(), st.integers(0, 10_000))
def test_live_reports_of_truncated_documents_match_the_elements(doc, cut):
    text = doc[0][: cut % (len(doc[0]) + 1)]
    whole, _ = elements(text)
    _check_live(live_items(*text), whole)

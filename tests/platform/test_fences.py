"""Fenced code blocks as CommonMark defines them, split into messages and closed in a live
reply: the spec's own examples (tests/platform/data/commonmark-fences.json, every example
of CommonMark 0.31.2 with a fence, CC-BY-SA 4.0) and the forms the three-backtick rule
missed (tildes, longer fences, fences under list items)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from hub.platform import balance_fences, split_message
from hub.platform._fences import fenced_blocks, open_fence

_SPEC = json.loads((Path(__file__).parent / "data" / "commonmark-fences.json").read_text(encoding="utf-8"))
_CODE = re.compile(r"<pre><code[^>]*>(.*?)</code></pre>", re.S)
_md = MarkdownIt("commonmark")


def _examples() -> list[Any]:
    return [pytest.param(e["markdown"], e["html"], id=f"example {e['example']}") for e in _SPEC["examples"]]


def _code(rendered: str) -> list[str]:
    return [html.unescape(c) for c in _CODE.findall(rendered)]


def _content(markdown: str, block: Any) -> str:
    """The block's code as CommonMark gives it: without its container's indentation, and
    without the quote marks of a block quote it is in."""
    quoted = ">" in markdown[markdown.rfind("\n", 0, block.start) + 1 : block.start]
    lines = [re.sub(r"^(?: {0,3}> ?)+", "", line) if quoted else line for line in block.body]
    lines = [line[min(block.indent, len(line) - len(line.lstrip(" "))) :] if not quoted else line for line in lines]
    return "".join(f"{line}\n" for line in lines)


def test_the_spec_examples_are_all_there() -> None:
    assert len(_SPEC["examples"]) == 39
    assert sum(e["section"] == "Fenced code blocks" for e in _SPEC["examples"]) == 29


@pytest.mark.parametrize(("markdown", "expected"), _examples())
def test_fenced_blocks_are_those_of_the_commonmark_spec(markdown: str, expected: str) -> None:
    """Every block found holds what the spec's HTML shows as code, in order."""
    code = _code(expected)
    found = [_content(markdown, b) for b in fenced_blocks(markdown)]
    it = iter(code)
    assert all(any(c == f for c in it) for f in found), (found, code)


@pytest.mark.parametrize(("markdown", "expected"), _examples())
def test_split_spec_examples_keep_every_fence_balanced(markdown: str, expected: str) -> None:
    """Split as small as allowed, each message's blocks are closed (unless the source left
    its block open), and no code is lost. As small as allowed: the fences and a character
    must fit in a message (a message is never over the limit, even to balance a fence)."""
    fences = [len(b.opener) + b.indent + len(b.closer) + 3 for b in fenced_blocks(markdown)]
    limit = max([16, *fences])
    messages = split_message(markdown, limit)
    assert all(len(m) <= limit for m in messages), messages
    unclosed = sum(not b.closed for m in messages for b in fenced_blocks(m))
    # a block the source left open may be closed when split; none is opened
    assert unclosed <= sum(not b.closed for b in fenced_blocks(markdown)), messages

    def code(text: str) -> str:
        return re.sub(r"\s", "", "".join("".join(b.body) for b in fenced_blocks(text)))

    assert "".join(code(m) for m in messages) == code(markdown)


@pytest.mark.parametrize(
    ("opener", "closer"),
    [("~~~", "~~~"), ("````python", "````"), ("~~~~~ text", "~~~~~"), ("   ```", "```")],
)
def test_a_long_block_of_any_fence_is_split_balanced(opener: str, closer: str) -> None:
    indent = len(opener) - len(opener.lstrip())
    body = [f"line {i:02d} " + "x" * 30 for i in range(60)]
    text = "Here:\n" + "\n".join([opener, *body, " " * indent + closer]) + "\nDone."
    messages = split_message(text, 1000)
    assert len(messages) >= 2
    for message in messages:
        blocks = fenced_blocks(message)
        assert blocks and all(b.closed for b in blocks), message
        assert len(message) <= 1000
    lines = [line.strip() for m in messages for line in m.split("\n")]
    assert [line for line in lines if line.startswith("line ")] == body


def test_an_80_line_block_under_a_list_item_at_discords_limit() -> None:
    body = [f"   step {i:02d}: " + "y" * 20 for i in range(80)]
    text = "1. Run this:\n   ```bash\n" + "\n".join(body) + "\n   ```\n2. Then check the logs."
    assert len(text) > 2000
    messages = split_message(text, 2000)
    assert len(messages) == 2
    for message in messages:
        assert all(b.closed for b in fenced_blocks(message)), message
        # what a renderer shows as code: every step, once, in order
    shown = [c for m in messages for c in _code(_md.render(m))]
    steps = [line.strip() for c in shown for line in c.splitlines() if line.strip()]
    assert steps == [line.strip() for line in body]
    assert messages[-1].endswith("2. Then check the logs.")


def test_a_live_reply_closes_and_reopens_the_fence_it_opened() -> None:
    assert balance_fences("- x\n  ~~~~py\n  code") == "- x\n  ~~~~py\n  code\n  ~~~~"
    assert balance_fences("````\nhas ``` inside\n") == "````\nhas ``` inside\n````"
    assert balance_fences("~~~\nclosed\n~~~") == "~~~\nclosed\n~~~"
    block = open_fence("text\n~~~~ sql\nSELECT 1")
    assert block is not None and block.opener == "~~~~ sql" and block.closer == "~~~~"

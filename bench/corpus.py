"""The parser benchmark's input, identical bytes for the hub and for Daydreams.

``python bench/corpus.py`` (re)writes ``bench/fixtures/response_16k.txt``; both
parsers read that committed file, so they always parse the same text. The unit is
Daydreams' response format (``<output name=...>``, which our parser accepts for
``type=``), repeated until it reaches SIZE characters.
"""

from __future__ import annotations

from pathlib import Path

SIZE = 16384
UNIT = (
    "<response>"
    "<reasoning>The user wants the weather in New York City; call get-weather, then answer.</reasoning>"
    '<action_call name="get-weather">{"location": "New York City", "units": "fahrenheit"}</action_call>'
    '<output name="text">{"content": "It is 72°F and sunny in New York City."}</output>'
    "</response>\n"
)
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "response_16k.txt"


def build(size: int = SIZE) -> str:
    """UNIT repeated until the text is at least ``size`` characters long."""
    n = -(-size // len(UNIT))
    return UNIT * n


def units(text: str) -> int:
    return text.count(UNIT)


def chunks(text: str, size: int) -> list[str]:
    """The text cut into pieces of ``size`` characters (the last may be shorter)."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def load() -> str:
    return FIXTURE.read_text(encoding="utf-8")


if __name__ == "__main__":
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    text = build()
    FIXTURE.write_text(text, encoding="utf-8", newline="\n")
    print(f"{FIXTURE}: {len(text)} characters, {len(text.encode())} bytes, {units(text)} units")

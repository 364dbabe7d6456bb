"""Micro-benchmark: ElementParser over a ~16 KB response in 1-, 8- and 32-char chunks.

Run: python bench/parser_micro.py [--repeat N]. Prints the best time per run and µs per KB.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hub.parser import ElementParser  # noqa: E402

UNIT = (
    "<response><reasoning>The user wants the weather in New York; call the action and"
    " then answer briefly.</reasoning>"
    '<action_call name="get-weather">{"location":"NYC"}</action_call>'
    '<output name="text">{"content":"It is sunny"}</output></response>'
)


def document(size: int = 16 * 1024) -> str:
    return (UNIT * (size // len(UNIT) + 1))[:size]


def run(chunks: list[str]) -> int:
    parser = ElementParser()
    count = 0
    for chunk in chunks:
        count += len(parser.feed(chunk))
    return count + len(parser.close())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    text = document()
    kb = len(text.encode()) / 1024
    expected = run([text])
    print(f"document: {len(text)} chars, {kb:.1f} KB, {expected} elements")
    for size in (1, 8, 32):
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        assert run(chunks) == expected
        best = min(_time(run, chunks) for _ in range(args.repeat))
        print(f"{size:>3}-char chunks: {best * 1e3:7.2f} ms  {best * 1e6 / kb:7.1f} µs/KB")


def _time(fn, arg) -> float:
    t = time.perf_counter()
    fn(arg)
    return time.perf_counter() - t


if __name__ == "__main__":
    main()

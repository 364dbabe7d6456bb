"""Micro-benchmark: ElementParser over a ~16 KB response in 1-, 8- and 32-char chunks.

Run: python bench/parser_micro.py [--repeat N] [--fixture PATH]. Prints the best and
median time per run, and µs per KB. ``--fixture`` parses a file instead (e.g. the
side-by-side benchmark's ``bench/fixtures/response_16k.txt``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hub.protocol import ElementParser

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
    ap.add_argument("--fixture", type=Path)
    args = ap.parse_args()
    text = args.fixture.read_text("utf-8") if args.fixture else document()
    kb = len(text.encode()) / 1024
    expected = run([text])
    print(f"document: {len(text)} chars, {kb:.1f} KB, {expected} elements")
    for size in (1, 8, 32):
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        assert run(chunks) == expected
        times = sorted(_time(run, chunks) for _ in range(args.repeat))
        best, median = times[0], times[len(times) // 2]
        print(
            f"{size:>3}-char chunks: best {best * 1e3:6.2f} ms ({best * 1e6 / kb:6.1f} µs/KB),"
            f" median {median * 1e3:6.2f} ms"
        )


def _time(fn, arg) -> float:
    t = time.perf_counter()
    fn(arg)
    return time.perf_counter() - t


if __name__ == "__main__":
    main()

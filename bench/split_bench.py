"""Splitting long replies where measuring a part is costly: Slack (each candidate rendered as
mrkdwn) and X (each counted by twitter-text), and how long the event loop waits meanwhile.

Run: python bench/split_bench.py [--repeat N]. For each case it prints the best time of a
split, the parts it made, and the worst lag of a 1 ms ticker on the event loop while the
platform splits the reply as it does before sending (``split_off_loop``: in a worker
thread past ``LONG_SPLIT`` characters). Before bisection (issue 40, items 8 and 9) the same
splits took 3.1 s and 14 s (Slack, 12.5 K and 42 K characters) and 0.6 s and 1.3 s (X, 2.4 K
and 5.8 K), all of it on the event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hub.platform import split_message, split_off_loop
from hub_slack._client import MAX_LENGTH, mrkdwn_len
from hub_twitter._text import split_tweets

_WORDS = ("alpha", "beta", "**bold**", "_it_", "gamma", "[a link](https://example.com)", "delta", "`code`", "naïve")


def paragraph(n: int) -> str:
    """One paragraph of ``n`` characters of Markdown: no line or sentence to cut at."""
    rng = random.Random(n)
    words: list[str] = []
    size = 0
    while size < n:
        words.append(rng.choice(_WORDS))
        size += len(words[-1]) + 1
    return " ".join(words)[:n]


def answer(n: int) -> str:
    """An answer of ``n`` characters in sentences, as a model writes one."""
    sentences = (f"Step {i}: the service restarts and checks its health, then reports back." for i in range(10**6))
    out, size = [], 0
    for s in sentences:
        if size >= n:
            break
        out.append(s)
        size += len(s) + 1
    return " ".join(out)[:n]


def slack(text: str) -> list[str]:
    return split_message(text, MAX_LENGTH, length=mrkdwn_len)


async def loop_lag(split: Callable[[str], list[str]], text: str) -> float:
    """The worst wait of a 1 ms ticker on the loop while ``split_off_loop`` splits ``text``."""
    worst = 0.0
    done = False

    async def ticker() -> None:
        nonlocal worst
        while not done:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            worst = max(worst, time.perf_counter() - t - 0.001)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    await split_off_loop(split, text)
    done = True
    await task
    return worst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    cases: list[tuple[str, Callable[[str], list[str]], str]] = [
        ("Slack, one 12.5 K-character paragraph", slack, paragraph(12_500)),
        ("Slack, one 42 K-character paragraph", slack, paragraph(42_000)),
        ("X, a 2.4 K-character answer", split_tweets, answer(2_400)),
        ("X, a 5.8 K-character answer", split_tweets, answer(5_800)),
    ]
    print(f"| case | split, best of {args.repeat} | parts | worst loop lag meanwhile |")
    print("|---|---|---|---|")
    for name, split, text in cases:
        best = float("inf")
        for _ in range(args.repeat):
            t = time.perf_counter()
            parts = split(text)
            best = min(best, time.perf_counter() - t)
        lag = asyncio.run(loop_lag(split, text))
        print(f"| {name} | {best * 1000:.0f} ms | {len(parts)} | {lag * 1000:.0f} ms |")


if __name__ == "__main__":
    main()

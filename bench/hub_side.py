"""The hub's side of the side-by-side benchmarks (bench/run.py calls these).

Each function measures the same thing as the Daydreams script of the same name in
``bench/daydreams/`` and returns a dict with the same keys (listed in its
docstring). ``run.py`` runs each one in a fresh process, as it does each Node
script, so that peak-RSS figures start from a clean interpreter:

    python bench/hub_side.py NAME --base-url URL [--turns N ...]

prints one JSON line: the dict plus ``"ok": true``, or ``"ok": false, "pending":
true`` while the function raises NotImplementedError.

Against the shared fake (``bench/fake_openai.py``) the hub must ask for model
``"hub"`` (or send the header ``X-Bench-Client: hub``), so that the fake answers in
the hub's format; see ``bench/scripts/turn.json`` for the exact responses and the
rule that picks step 2 (the last message contains ``"temperature"``).
"""

from __future__ import annotations

import argparse
import json
import sys

MODEL = "hub"  # the fake's client name for the hub's responses


def parser(fixture: str, chunks: list[int], reps: int, warmup: int) -> dict:
    """Parse the fixture (``bench/fixtures/response_16k.txt``) cut into each chunk size.

    Returns ``{"by_chunk": {"1": {"ms": median_ms, "ms_p90": ...}, "8": ..., "32": ...}}``;
    every unit's action call and output must come out whole (assert it).
    """
    raise NotImplementedError("hub side pending")


def turn(base_url: str, turns: int, warmup: int) -> dict:
    """Sequential full turns: input, prompt, stream, parse, getWeather, step 2, output
    handler, state saved. ``turns`` in new conversations, then ``turns`` in one.

    Returns ``{"turns_per_s": distinct, "turns_per_s_one_conversation": one}``. Assert
    that each turn ran the action and the output handler once and that the fake saw
    responses 0,1 per turn (``GET /stats``).
    """
    raise NotImplementedError("hub side pending")


def longout(base_url: str) -> dict:
    """One turn whose output is about 200 KB, streamed in 8-character chunks
    (the fake serves ``scripts/longout.json``). Returns ``{"ms", "peak_rss_mb"}``."""
    raise NotImplementedError("hub side pending")


def many(base_url: str, n: int) -> dict:
    """``n`` full turns in ``n`` distinct conversations at once against a fake with 1 s
    latency. Returns ``{"wall_s", "peak_rss_mb"}``; assert n actions and n outputs."""
    raise NotImplementedError("hub side pending")


def latency(base_url: str, turns: int, warmup: int) -> dict:
    """From the arrival (at the HTTP client, before parsing) of the bytes that complete
    ``</output>`` to the call of the output handler, over ``turns`` sequential turns
    (the fake paces events 1 ms apart). Returns ``{"p50_ms", "p99_ms"}``."""
    raise NotImplementedError("hub side pending")


def prompt_growth(base_url: str, turns: int) -> dict:
    """``turns`` full turns in one conversation; the fake's ``GET /stats`` gives each
    prompt's characters (all messages). Returns ``{"first_tokens", "last_tokens",
    "growth_chars_per_turn", "step1_chars": [...]}`` (tokens = chars / 4; growth over
    the second half of the turns)."""
    raise NotImplementedError("hub side pending")


FUNCTIONS = {f.__name__: f for f in (parser, turn, longout, many, latency, prompt_growth)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Run one hub-side measurement; print one JSON line.")
    p.add_argument("name", choices=sorted(FUNCTIONS))
    p.add_argument("--base-url")
    p.add_argument("--fixture")
    p.add_argument("--chunks", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--reps", type=int)
    p.add_argument("--warmup", type=int)
    p.add_argument("--turns", type=int)
    p.add_argument("--n", type=int)
    a = p.parse_args(argv)
    kwargs = {k: v for k, v in vars(a).items() if k != "name" and v is not None}
    try:
        result = FUNCTIONS[a.name](**kwargs)
    except NotImplementedError as e:
        print(json.dumps({"ok": False, "pending": True, "error": str(e)}))
        return 0
    print(json.dumps({"ok": True, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

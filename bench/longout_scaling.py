#!/usr/bin/env python3
"""Is the hub's long output linear in its size? Time and peak memory at 50 KB to 800 KB.

    python bench/longout_scaling.py [--sizes 50,100,200,400,800] [--reps 3]

For each size it writes a script like ``scripts/longout.json`` (the same repeated line,
more or fewer times), serves it with ``fake_openai.py --chunk 8``, and runs
``hub_side.py longout`` in a fresh process ``--reps`` times (the median is kept).
Prints size | ms | ms per KB | peak RSS over the idle hub (MB) | bytes of peak RSS per
byte of output. Linear means the per-KB columns stay flat as the size grows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run import fake_server, run_json  # noqa: E402

LINE = "All work and no play makes Jack a dull boy. "
PREFIX = '<response>\n<reasoning>Write the long text.</reasoning>\n<output type="cli:message">'
SUFFIX = "</output>\n</response>"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="50,100,200,400,800", help="KB of output, comma-separated")
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="hub-longout-") as tmp:
        for kb in (int(x) for x in a.sizes.split(",")):
            times = round(kb * 1024 / len(LINE))
            script = Path(tmp) / f"longout_{kb}.json"
            script.write_text(
                json.dumps(
                    {
                        "default": "hub",
                        "clients": {
                            "hub": {"responses": [{"prefix": PREFIX, "repeat": LINE, "times": times, "suffix": SUFFIX}]}
                        },
                    }
                )
            )
            results = []
            with fake_server(str(script), chunk=8) as base_url:  # an absolute path wins the join
                for _ in range(a.reps):
                    r = run_json(
                        [
                            sys.executable,
                            str(BENCH / "hub_side.py"),
                            "longout",
                            "--base-url",
                            base_url,
                            "--min-chars",
                            str(kb * 1000),
                        ]
                    )
                    if not r.get("ok"):
                        print(f"{kb} KB: {r.get('error')}", file=sys.stderr)
                        return 1
                    results.append(r)
            chars = results[0]["output_chars"]
            ms = statistics.median(r["ms"] for r in results)
            delta = statistics.median(r["peak_rss_delta_mb"] for r in results)
            rows.append((kb, chars, ms, delta))
    print("| output | events (8 chars) | ms | ms per 100 KB | peak RSS over idle, MB | RSS bytes per output byte |")
    print("|---:|---:|---:|---:|---:|---:|")
    for kb, chars, ms, delta in rows:
        print(
            f"| {kb} KB | {chars // 8:,} | {ms:.0f} | {ms / chars * 102_400:.1f} | {delta:.1f} "
            f"| {delta * 2**20 / chars:.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The dashboard's answer times with many runs (issue 15: every request under 200 ms at 1,000).

    python bench/ui_bench.py [--runs 1000 10000] [--requests 30] [--json]

For each size, a hub with the SQLite stores in a temporary data dir is seeded with that many
ended runs (three platforms, a few conversations, one event each), its endpoint started on
port 0 with ``[http] token``, and one logged-in client asks each dashboard page
``--requests`` times, in turn: the runs list (first page), a deep page (keyset, the last
one), a filtered page (state and platform), the rows fragment the list polls, a run's trace,
the searches (text, @handle, conversations), the conversations, the personas and a persona,
access, the chat panel and health (1 h and 24 h windows). Times are from sending the request to
the whole body read, on loopback; the median, the 95th percentile and the maximum are kept.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hub import Hub, HubConfig, ScriptedModel  # noqa: E402
from hub.config import HttpSection
from hub.logs import InputLog
from hub.store import RunRecord, RunState

TOKEN = "bench-dashboard-token-0123456789"


async def seed(hub: Hub, n: int) -> list[RunRecord]:
    runs = []
    t0 = time.time() - n
    for i in range(n):
        platform = ("telegram", "discord", "twitter")[i % 3]
        runs.append(
            RunRecord(
                context=f"{platform}:chat:{i % 50}",
                started=t0 + i,
                state=(RunState.COMPLETED, RunState.FAILED)[i % 7 == 0],
                steps=1,
                user=str(i % 50),
                user_name=f"User {i % 50}",
                user_handle=f"user_{i % 50}",
                message=f"message number {i} about the weather",
                reply=f"reply {i}: sunny",
            )
        )
    for b in range(0, n, 200):
        batch = runs[b : b + 200]
        await asyncio.gather(*(hub.runs.create(r) for r in batch))
        for r in batch:
            hub.runs.append(r, InputLog(type="bench", content=f"message {r.id[:6]}", ts=r.started))
            r.ended = r.started + 0.4
        await asyncio.gather(*(hub.runs.finish(r) for r in batch))
    return runs


async def measure(n: int, requests: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = HubConfig()
        cfg.hub.data_dir = tmp
        cfg.hub.contexts_dir = tmp
        (Path(tmp) / "default.toml").write_text('name = "default"\ninstructions = "Be brief."\n')
        cfg.memory.episodes = False
        cfg.http = HttpSection(port=0, token=TOKEN)
        async with Hub(cfg, model=ScriptedModel(default="ok"), load_extensions=False) as hub:
            runs = await seed(hub, n)
            base = f"http://127.0.0.1:{hub.http.port}"  # type: ignore[union-attr]
            jar = aiohttp.CookieJar(unsafe=True)
            async with aiohttp.ClientSession(cookie_jar=jar) as s:
                async with s.post(base + "/ui/login", data={"token": TOKEN}) as resp:
                    assert resp.status == 200, resp.status
                oldest = min(runs, key=lambda r: (r.started, r.id))
                last_page = sorted(runs, key=lambda r: (r.started, r.id))[50]
                pages = {
                    "runs, first page": "/ui/",
                    "runs, the deepest page (keyset)": f"/ui/?before={last_page.started!r}:{last_page.id}",
                    "runs, failed on telegram": "/ui/?state=failed&platform=telegram",
                    "rows fragment (polled)": "/ui/runs/rows",
                    "a run's trace": f"/ui/runs/{oldest.id}",
                    "runs, searched (text)": "/ui/?q=number+4242",
                    "runs, searched (@handle)": "/ui/?q=%40user_7",
                    "conversations": "/ui/conversations",
                    "conversations, searched": "/ui/conversations?q=User+12",
                    "personas (who uses each)": "/ui/personas",
                    "a persona": "/ui/personas/default",
                    "access": "/ui/access",
                    "access rows (polled)": "/ui/access/rows",
                    "chat": "/ui/chat",
                    "health": "/ui/health",
                    "health, 24 h window": "/ui/health?window=24h",
                }
                times: dict[str, list[float]] = {name: [] for name in pages}
                for _ in range(requests):
                    for name, path in pages.items():
                        t = time.perf_counter()
                        async with s.get(base + path) as resp:
                            body = await resp.text()
                        times[name].append((time.perf_counter() - t) * 1000)
                        assert resp.status == 200 and not resp.url.path.endswith("/login"), (path, resp.status)
                        if name.startswith("runs, first"):
                            assert len(re.findall(r"data-run=", body)) == 50
    return {
        name: {"p50": statistics.median(v), "p95": sorted(v)[int(0.95 * (len(v) - 1))], "max": max(v)}
        for name, v in times.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    results: dict[int, Any] = {}
    for n in args.runs:
        results[n] = asyncio.run(measure(n, args.requests))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"| page | {' | '.join(f'{n:,} runs p50 / p95 / max (ms)' for n in args.runs)} |")
    print(f"|---|{'---|' * len(args.runs)}")
    for name in results[args.runs[0]]:
        cells = [
            f"{results[n][name]['p50']:.1f} / {results[n][name]['p95']:.1f} / {results[n][name]['max']:.1f}"
            for n in args.runs
        ]
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()

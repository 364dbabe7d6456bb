"""Workers benchmark: 1,000 conversations (one message each) at 1 s model latency, answered
by one and then by two ``hub run`` workers on the same PostgreSQL database (a fresh schema
each), Telegram in webhook mode behind a round-robin load balancer (tests/workers/cluster.py).

    .venv/bin/python bench/workers_bench.py [--conversations 1000] [--latency 1.0]
        [--lock-connections 30] [--workers 1 2]

Prints one row per worker count: wall time (first POST to last reply), peak RSS per
worker, CPU seconds per turn (all workers' user+system time over the turns), and the ratio
of each wall time to the one-worker wall time. Needs PostgreSQL ($HUB_TEST_POSTGRES).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hub.testing import FakeOpenAI  # noqa: E402
from hub.testing.postgres import temporary_schema  # noqa: E402
from hub.testing.telegram import FakeTelegram  # noqa: E402
from tests.workers.cluster import TOKEN, Balancer, Worker, ack, make_workers  # noqa: E402


def _peak_rss_mb(worker: Worker) -> float:
    try:
        for line in Path(f"/proc/{worker.proc.pid if worker.proc else 0}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


async def one(n_workers: int, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            temporary_schema() as url,
            FakeTelegram(token=TOKEN) as tg,
            FakeOpenAI(default=ack, latency=args.latency, record=False) as model,
        ):
            workers = make_workers(
                Path(tmp),
                n_workers,
                url=url,
                model_url=model.url,
                telegram_url=f"{tg.base_url}/bot",
                lease=30.0,
                concurrency=256,
                lock_connections=args.lock_connections,
                pool_size=4,
            )
            await asyncio.gather(*(w.start() for w in workers))
            try:
                updates = []
                for c in range(args.conversations):
                    tg.push_message(chat_id=10_000 + c, text=f"c{c}#0")
                    updates.append(tg.state.updates[-1])
                cpu0 = sum(w.cpu_seconds() for w in workers)
                async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100)) as session:
                    lb = Balancer(workers, session)
                    start = time.monotonic()
                    await asyncio.gather(*(lb.post(u, deadline=600) for u in updates))
                    while len(tg.sent) < args.conversations:
                        await asyncio.sleep(0.05)
                    wall = time.monotonic() - start
                cpu = sum(w.cpu_seconds() for w in workers) - cpu0
                rss = max(_peak_rss_mb(w) for w in workers)
            finally:
                await asyncio.gather(*(w.stop() for w in workers))
    return {"workers": n_workers, "wall": wall, "rss_mb": rss, "cpu_ms_per_turn": 1000 * cpu / args.conversations}


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conversations", type=int, default=1000)
    p.add_argument("--latency", type=float, default=1.0)
    p.add_argument(
        "--lock-connections",
        type=int,
        default=30,
        help="[store] lock_connections per worker: conversations one worker runs at once",
    )
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = p.parse_args()
    rows = [await one(n, args) for n in args.workers]
    base = rows[0]["wall"]
    print(
        f"{args.conversations} conversations, model latency {args.latency:g}s, lock_connections {args.lock_connections}"
    )
    print("| workers | wall (s) | vs one | peak RSS per worker (MB) | CPU per turn (ms) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['workers']:.0f} | {r['wall']:.1f} | {r['wall'] / base:.2f} | {r['rss_mb']:.0f} | {r['cpu_ms_per_turn']:.1f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())

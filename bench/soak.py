"""Soak: many turns over many conversations, with RSS, database size and event-loop lag
sampled as it runs (issue 16's proof that nothing grows without bound).

    python bench/soak.py [--turns 100000] [--conversations 1000] [--rate R] [--max-runs N]

Two phases, in one process, against the scripted model (no network, no model latency: the
hub's own cost is what is measured):

1. **Capacity.** ``--capacity-turns`` turns as fast as the hub takes them, 64 conversations
   in flight: turns per second.
2. **Soak.** ``--turns`` turns spread over ``--conversations`` conversations, submitted at
   ``--rate`` turns per second (default: half the measured capacity). Every
   ``--sample`` seconds: RSS, the database's size on disk (``hub.db`` with its WAL), the
   event loop's lag (p50/p99/max of a 50 ms ticker's overshoot in that window), the longest
   callback in CPU time of the loop's thread (what the hub itself held the loop for, apart
   from other processes taking the CPU on a shared machine), turns done.

Every turn is a real run: the input is recorded in the inbox, the prompt built, the scripted
answer streamed through the parser, the output handler called, memory saved, the run and its
events written to SQLite. Retention (``[hub] retention``) keeps ``--max-runs`` runs, pruned every
``--prune-interval`` seconds, so a bounded database is what a healthy hub shows. Episodic memory is off (its store has its own
benchmark in ``recall_bench.py``).

Prints one JSON line at the end (every sample goes to ``--out``), and a Markdown table
with ``--markdown``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic import BaseModel  # noqa: E402


class ChatArgs(BaseModel):
    id: str


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def db_mb(data_dir: Path) -> float:
    total = 0
    for name in ("hub.db", "hub.db-wal", "hub.db-shm"):
        p = data_dir / name
        if p.exists():
            total += p.stat().st_size
    return total / 1e6


def q(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def make_hub(data_dir: Path, max_runs: int, prune_interval: float = 30.0) -> tuple[Any, dict[str, int]]:
    from hub import Context, Extension, Hub, HubConfig, ScriptedModel, output

    counts = {"outputs": 0}

    def answer(request: Any) -> str:
        return '<response><output type="soak:reply">Noted. The tally goes on.</output></response>'

    chat = Context(type="soak:chat", schema=ChatArgs, key=lambda a: a.id, create=lambda *a: {"turns": 0})

    @output(type="soak:reply", description="A reply in the soak conversation.")
    async def reply(content: str, ctx: Any) -> None:
        counts["outputs"] += 1
        ctx.memory["turns"] = ctx.memory.get("turns", 0) + 1

    hub_cfg: dict[str, Any] = {"data_dir": str(data_dir), "contexts_dir": str(ROOT / "contexts"), "log_level": "ERROR"}
    cfg_data: dict[str, Any] = {
        "hub": hub_cfg,
        "model": {"provider": "openai", "name": "soak", "api_key": "x", "concurrency": 64},
        "memory": {"episodes": False},
    }
    # retention as an operator would set it, pruning often enough to show in a short soak
    hub_cfg["retention"] = {"days": 90, "max_runs": max_runs, "interval": prune_interval}
    cfg = HubConfig.model_validate(cfg_data)
    model = ScriptedModel(answer, chunk=16)
    model.requests = collections.deque(maxlen=16)  # the test model keeps requests for tests; not 100,000 here
    ext = Extension(name="soak", contexts=[chat], outputs=[reply])
    return Hub(cfg, model=model, load_extensions=False, extensions=[ext]), counts


async def capacity(hub: Any, turns: int, width: int = 64) -> float:
    sem = asyncio.Semaphore(width)

    async def one(i: int) -> None:
        async with sem:
            result = await hub.send(f"soak:chat:cap-{i % width}", data=f"capacity turn {i}")
            assert result is not None and result.ok, result

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(turns)))
    return turns / (time.perf_counter() - t0)


class CallbackClock:
    """The longest callback the event loop ran, in CPU time of its thread (``thread_time``:
    the time another process took the CPU is not counted), since the last :meth:`take`."""

    def __init__(self) -> None:
        self._run = asyncio.events.Handle._run

    def __enter__(self) -> CallbackClock:
        clock, run = self, self._run
        gc.callbacks.append(self._gc)

        def timed(handle: asyncio.events.Handle) -> None:
            t = time.thread_time()
            try:
                run(handle)
            finally:
                clock.longest = max(clock.longest, time.thread_time() - t)

        asyncio.events.Handle._run = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.events.Handle._run = self._run  # type: ignore[method-assign]
        gc.callbacks.remove(self._gc)

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        """The garbage collector's pauses: part of a callback's time, reported apart."""
        if phase == "start":
            self._gc_start = time.thread_time()
        else:
            self.gc_longest = max(self.gc_longest, time.thread_time() - self._gc_start)

    longest = gc_longest = _gc_start = 0.0

    def take(self) -> tuple[float, float]:
        out = (self.longest * 1e3, self.gc_longest * 1e3)
        self.longest = self.gc_longest = 0.0
        return out


async def soak(hub: Any, data_dir: Path, *, turns: int, conversations: int, rate: float, sample: float) -> dict:
    loop = asyncio.get_running_loop()
    callbacks = CallbackClock().__enter__()
    lags: list[float] = []
    samples: list[dict[str, Any]] = []
    done = 0
    failed = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            t = loop.time()
            await asyncio.sleep(0.05)
            lags.append(max(0.0, loop.time() - t - 0.05) * 1e3)

    async def sampler(t0: float) -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), timeout=sample)
            except TimeoutError:
                pass
            window, lags[:] = list(lags), []
            longest, gc_pause = callbacks.take()
            samples.append(
                {
                    "t": round(loop.time() - t0, 1),
                    "turns": done,
                    "rss_mb": round(rss_mb(), 1),
                    "db_mb": round(db_mb(data_dir), 2),
                    "lag_p50_ms": round(q(window, 0.50), 2),
                    "lag_p99_ms": round(q(window, 0.99), 2),
                    "lag_max_ms": round(max(window, default=0.0), 2),
                    "callback_max_cpu_ms": round(longest, 2),
                    "gc_max_cpu_ms": round(gc_pause, 2),
                }
            )

    async def finish(sub: Any) -> None:
        nonlocal done, failed
        result = await sub.wait()
        if result.ok:
            done += 1
        else:
            failed += 1

    t0 = loop.time()
    tasks = [asyncio.create_task(ticker()), asyncio.create_task(sampler(t0))]
    waiting: set[asyncio.Task[None]] = set()
    interval = 1.0 / rate
    for i in range(turns):
        due = t0 + i * interval
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        sub = await hub.submit(f"soak:chat:c-{i % conversations}", data=f"turn {i}: remember this number {i}")
        task = asyncio.create_task(finish(sub))
        waiting.add(task)
        task.add_done_callback(waiting.discard)
    await asyncio.gather(*waiting)
    wall = loop.time() - t0
    stop.set()
    await asyncio.gather(*tasks)
    callbacks.__exit__()
    return {"turns": done, "failed": failed, "wall_s": round(wall, 1), "samples": samples}


def summarise(result: dict) -> dict:
    samples = result["samples"]
    warm = samples[max(1, len(samples) // 5) :] or samples  # after the first fifth
    rss = [s["rss_mb"] for s in warm]
    all_lags = [s["lag_p99_ms"] for s in warm]
    return {
        "rss_after_warmup_mb": [min(rss), max(rss)],
        "rss_spread_pct": round((max(rss) - min(rss)) / min(rss) * 100, 1),
        "db_mb_first_last_max": [samples[0]["db_mb"], samples[-1]["db_mb"], max(s["db_mb"] for s in samples)],
        "lag_p99_ms_worst_window": max(all_lags),
        "lag_p99_ms_median_window": statistics.median(all_lags),
        "lag_p99_windows_over_50ms": sum(1 for v in all_lags if v > 50),
        "callback_cpu_ms_worst_window": max(s["callback_max_cpu_ms"] for s in warm),
        "callback_cpu_ms_median_window": statistics.median(s["callback_max_cpu_ms"] for s in warm),
    }


async def main_async(args: argparse.Namespace) -> dict:
    import logging

    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="hub-soak-") as tmp:
        data = Path(tmp)
        hub, counts = make_hub(data, args.max_runs, args.prune_interval)
        async with hub:
            from hub.cli._heap import settle_heap

            settle_heap()  # as `hub run` does once the hub has started
            cap = await capacity(hub, args.capacity_turns)
            rate = args.rate or cap / 2
            res = await soak(
                hub, data, turns=args.turns, conversations=args.conversations, rate=rate, sample=args.sample
            )
        res.update(
            {
                "capacity_turns_per_s": round(cap, 1),
                "rate_turns_per_s": round(rate, 1),
                "conversations": args.conversations,
                "max_runs": args.max_runs,
                "outputs": counts["outputs"],
            }
        )
        res["summary"] = summarise(res)
        return res


def markdown(res: dict) -> str:
    s = res["summary"]
    rows = [
        ("turns (failed)", f"{res['turns']:,} ({res['failed']})"),
        ("conversations", f"{res['conversations']:,}"),
        ("capacity, turns/s", f"{res['capacity_turns_per_s']}"),
        ("soak rate, turns/s", f"{res['rate_turns_per_s']}"),
        ("wall", f"{res['wall_s']} s"),
        (
            "RSS after warm-up, min–max",
            f"{s['rss_after_warmup_mb'][0]}–{s['rss_after_warmup_mb'][1]} MB ({s['rss_spread_pct']}%)",
        ),
        ("database, first / last / max sample", " / ".join(f"{v} MB" for v in s["db_mb_first_last_max"])),
        (
            "loop lag p99, median window / worst window",
            f"{s['lag_p99_ms_median_window']} / {s['lag_p99_ms_worst_window']} ms",
        ),
        (
            "longest callback (CPU of the loop's thread), median window / worst window",
            f"{s['callback_cpu_ms_median_window']} / {s['callback_cpu_ms_worst_window']} ms",
        ),
    ]
    head = ["| figure | value |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)]
    windows = [
        "",
        "| window end, s | turns | loop lag p99, ms | longest callback CPU, ms | of it GC, ms | RSS, MB | database, MB |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {w['t']} | {w['turns']:,} | {w['lag_p99_ms']} | {w['callback_max_cpu_ms']} | {w['gc_max_cpu_ms']} "
            f"| {w['rss_mb']} | {w['db_mb']} |"
            for w in res["samples"]
        ),
    ]
    return "\n".join(head + windows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=100_000)
    ap.add_argument("--conversations", type=int, default=1_000)
    ap.add_argument("--capacity-turns", type=int, default=3_000)
    ap.add_argument("--rate", type=float, default=0.0, help="turns per second (default: half the capacity)")
    ap.add_argument("--max-runs", type=int, default=20_000, help="[hub] retention max_runs")
    ap.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
    ap.add_argument("--prune-interval", type=float, default=30.0, help="[hub] retention interval, seconds")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "bench" / "results" / "soak.json",
        help="where every sample goes (the printed line has the summary)",
    )
    args = ap.parse_args(argv)
    res = asyncio.run(main_async(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1), encoding="utf-8")
    print(json.dumps({k: v for k, v in res.items() if k != "samples"}))
    if args.markdown:
        print(markdown(res))
    return 0 if res["failed"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

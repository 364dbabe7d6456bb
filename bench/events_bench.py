"""The engine's turn rate with run-event subscribers attached (issue 12: within 5% of none).

    python bench/events_bench.py [--turns 300] [--rounds 7] [--json]

Each turn is the benchmark's full turn (bench/hub_side.py's agent: reasoning and a
``getWeather`` call, the action result, then the output), from the in-process scripted
model and with the in-memory stores, so that the engine and the event fan-out are all
that is measured. Three set-ups, measured in interleaved rounds, after one discarded
round, the order rotating each round, so that the machine's drift hits each alike; the
median of the rounds is kept:

- **none**: no subscriber (``publish`` returns at once);
- **live**: one ``hub.events()`` subscriber, a task reading every event as it comes;
- **stalled**: one subscriber that never reads (its buffer fills, then it drops).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hub_side import Counters, bench_extension, quiet_logs  # noqa: E402

STEP1 = (
    "<response><reasoning>The user wants the weather.</reasoning>"
    '<action_call name="getWeather">{"location": "New York City"}</action_call></response>'
)
STEP2 = '<response><output type="cli:message">It is 72°F in New York City.</output></response>'


def reply(request: Any) -> str:
    return STEP2 if 'status="ok" new="true"' in request.messages[-1]["content"] else STEP1


async def turns(n: int, mode: str) -> tuple[float, float]:
    """Turns per second over ``n`` sequential turns, each in a new conversation: by the wall
    clock, and by the process's CPU time (steadier on a machine shared with other work)."""
    import tempfile

    from hub import Hub, HubConfig, InMemoryStore, ScriptedModel
    from hub.store import InMemoryInbox, InMemoryRunStore

    counters = Counters()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = HubConfig.model_validate(
            {
                "hub": {"data_dir": tmp, "contexts_dir": tmp, "log_level": "ERROR"},
                "memory": {"episodes": False},
            }
        )
        hub = Hub(
            cfg,
            model=ScriptedModel(reply),
            load_extensions=False,
            extensions=[bench_extension(counters)],
            memory=InMemoryStore(),
            runs=InMemoryRunStore(),
            inbox=InMemoryInbox(),
        )
        async with hub:
            seen = 0
            reader = None
            stream = None
            if mode == "live":
                stream = hub.events()

                async def read() -> None:
                    nonlocal seen
                    async for _ in stream:
                        seen += 1

                reader = asyncio.create_task(read())
            elif mode == "stalled":
                stream = hub.events()
            await hub.send("bench:chat", {"id": "warm-up"}, "hi")
            started, cpu = time.perf_counter(), time.process_time()
            for i in range(n):
                await hub.send("bench:chat", {"id": f"c{i}"}, "What is the weather in New York City?")
            took, cpu = time.perf_counter() - started, time.process_time() - cpu
            if stream is not None:
                stream.close()
            if reader is not None:
                await reader
                assert seen > 0 and stream.dropped == 0, (seen, stream.dropped)
            if mode == "stalled":
                assert stream.dropped > 0
    assert counters.actions == n + 1 and counters.outputs == n + 1, (counters.actions, counters.outputs)
    return n / took, n / cpu


async def per_event(n: int = 100_000) -> dict[str, float]:
    """CPU microseconds per event: publishing with no subscriber, to one, and reading it."""
    from hub.events import EventBus
    from hub.logs import OutputLog
    from hub.store import RunRecord

    bus, record, entry = EventBus(), RunRecord(context="bench:chat:1"), OutputLog(type="cli:message", content="hi")
    t = time.process_time()
    for _ in range(n):
        bus.entry(record, entry)
    none = time.process_time() - t
    stream = bus.subscribe(maxsize=n)
    t = time.process_time()
    for _ in range(n):
        bus.entry(record, entry)
    publish = time.process_time() - t
    stream.close()
    t = time.process_time()
    read = sum([1 async for _ in stream])
    assert read == n + 1  # the run_started that announces a run first seen by the bus
    return {"none_us": none / n * 1e6, "publish_us": publish / n * 1e6, "read_us": (time.process_time() - t) / n * 1e6}


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--turns", type=int, default=300)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    quiet_logs()
    modes = ("none", "live", "stalled")
    wall: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    for m in modes:  # a discarded round: imports, caches and the allocator settle
        await turns(args.turns, m)
    for r in range(args.rounds):
        for m in modes[r % 3 :] + modes[: r % 3]:  # each set-up takes each place in turn
            w, c = await turns(args.turns, m)
            wall[m].append(w)
            cpu[m].append(c)
    mw = {m: statistics.median(v) for m, v in wall.items()}
    mc = {m: statistics.median(v) for m, v in cpu.items()}
    result = {
        "turns": args.turns,
        "rounds": args.rounds,
        "turns_per_s_wall": {m: round(v, 1) for m, v in mw.items()},
        "turns_per_cpu_s": {m: round(v, 1) for m, v in mc.items()},
        "live_vs_none_wall": round(mw["live"] / mw["none"], 3),
        "live_vs_none_cpu": round(mc["live"] / mc["none"], 3),
    }
    result["per_event"] = {k: round(v, 2) for k, v in (await per_event()).items()}
    if args.json:
        print(json.dumps(result))
        return
    print(f"median of {args.rounds} rounds of {args.turns} turns")
    print(f"{'set-up':10} {'turns/s':>9} {'vs none':>8} {'turns/CPU-s':>12} {'vs none':>8}")
    for m in modes:
        print(f"{m:10} {mw[m]:9.1f} {mw[m] / mw['none']:8.3f} {mc[m]:12.1f} {mc[m] / mc['none']:8.3f}")
    pe = result["per_event"]
    print(
        f"per event (CPU): {pe['none_us']:.2f} us with no subscriber, {pe['publish_us']:.2f} us to publish "
        f"to one, {pe['read_us']:.2f} us to read it"
    )


if __name__ == "__main__":
    asyncio.run(main())

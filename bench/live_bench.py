"""Live replies (issue 12): on the Telegram fake, time from the model's first output characters
to the first visible text, p50 and p99, and edits per reply; in process, the engine's turn rate
with a live output and one reading ``hub.events()`` subscriber against none.

    python bench/live_bench.py [--replies 30] [--turns 200] [--rounds 5] [--json]

Each reply is about 1,500 characters streamed by a slow in-process model (20 characters
every 10 ms, so about 0.75 s per reply) into ``telegram:send`` with ``live = true`` and
``live_interval = 0.2``, through the real python-telegram-bot client against the loopback
fake (hub.testing.telegram). "First visible" is when the fake received
the ``sendMessage`` that showed the reply's first words; the start is when the model yielded
the first characters inside ``<output>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator

from hub import Hub, HubConfig
from hub.models import Model, ModelRequest, Usage
from hub.testing.telegram import FakeTelegram
from hub_telegram import TelegramSettings, extension

HEAD = '<response><output type="telegram:send">'
BODY = "\n\n".join(f"Paragraph {i}: " + " ".join(f"word{i}.{j}" for j in range(25)) for i in range(7))


class SlowModel(Model):
    name = "slow"

    def __init__(self) -> None:
        self.first: list[float] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage]:
        yield HEAD
        for i in range(0, len(BODY), 20):
            await asyncio.sleep(0.01)
            if i == 0:
                self.first.append(time.monotonic())
            yield BODY[i : i + 20]
        yield "</output></response>"
        yield Usage(prompt_tokens=100, completion_tokens=len(BODY) // 4, finish_reason="stop")


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


async def main(replies: int) -> dict[str, float]:
    import tempfile

    model = SlowModel()
    async with FakeTelegram() as tg:
        with tempfile.TemporaryDirectory() as tmp:
            cfg = HubConfig()
            cfg.hub.data_dir = tmp
            cfg.hub.contexts_dir = tmp
            cfg.memory.episodes = False
            ext = extension(
                TelegramSettings(
                    token="123456:BENCH",
                    base_url=f"{tg.base_url}/bot",
                    live=True,
                    live_interval=0.2,
                    chat_rate=20,
                    poll_timeout=5,
                )
            )
            async with Hub(cfg, model=model, load_extensions=False, extensions=[ext]):
                for i in range(replies):  # one at a time, each in its own chat
                    tg.push_message(chat_id=1000 + i, text="tell me")
                    await tg.wait_for(lambda i=i: tg.shown(1000 + i) == [BODY], timeout=30)
    latencies, edits = [], []
    for i in range(replies):
        chat = 1000 + i
        sends = [r for r in tg.requests if r.name == "sendMessage" and int(r.params["chat_id"]) == chat]
        edits.append(sum(1 for r in tg.requests if r.name == "editMessageText" and int(r.params["chat_id"]) == chat))
        latencies.append(sends[0].at - model.first[i])
    return {
        "replies": replies,
        "first_visible_p50_ms": 1000 * statistics.median(latencies),
        "first_visible_p99_ms": 1000 * pct(latencies, 0.99),
        "edits_per_reply": statistics.mean(edits),
        "stream_s": len(range(0, len(BODY), 20)) * 0.01,
    }


LIVE_REPLY = "<response><output>" + " ".join(f"word{i}" for i in range(100)) + "</output></response>"


async def live_turns(n: int, subscribed: bool) -> tuple[float, float]:
    """Turns per second (wall, CPU) of ``n`` one-step turns whose reply (about 600
    characters in 75 chunks of 8) goes to a live output, the in-memory stores, with or without
    one subscriber reading every event (``output_partial`` included: what arrives within 50 ms
    is one event)."""
    import tempfile

    from pydantic import BaseModel

    from hub import Context, Extension, InMemoryStore, LiveText, ScriptedModel, output
    from hub.store import InMemoryInbox, InMemoryRunStore

    class Args(BaseModel):
        id: str

    @output(type="bench:say", live=True)
    async def say(content: LiveText, ctx: object) -> None:
        async for _ in content:  # a reader that keeps up, as a platform's LiveMessage does
            pass

    ext = Extension(
        name="bench",
        contexts=[Context(type="bench:chat", schema=Args, key=lambda a: a.id, reply_output="bench:say")],
        outputs=[say],
    )
    with tempfile.TemporaryDirectory() as tmp:
        cfg = HubConfig.model_validate(
            {"hub": {"data_dir": tmp, "contexts_dir": tmp, "log_level": "ERROR"}, "memory": {"episodes": False}}
        )
        hub = Hub(
            cfg,
            model=ScriptedModel(lambda r: LIVE_REPLY, chunk=8),
            load_extensions=False,
            extensions=[ext],
            memory=InMemoryStore(),
            runs=InMemoryRunStore(),
            inbox=InMemoryInbox(),
        )
        async with hub:
            seen = partials = 0
            stream = hub.events() if subscribed else None
            reader = None
            if stream is not None:

                async def read() -> None:
                    nonlocal seen, partials
                    async for e in stream:
                        seen += 1
                        partials += e.kind == "output_partial"

                reader = asyncio.create_task(read())
            await hub.send("bench:chat", {"id": "warm-up"}, "hi")
            started, cpu = time.perf_counter(), time.process_time()
            for i in range(n):
                result = await hub.send("bench:chat", {"id": f"c{i}"}, "hi")
                assert result is not None and result.ok and result.outputs[0].live
            took, cpu = time.perf_counter() - started, time.process_time() - cpu
            if stream is not None and reader is not None:
                stream.close()
                await reader
                assert partials >= n and stream.dropped == 0, (seen, partials, stream.dropped)
    return n / took, n / cpu


async def turn_rates(n: int, rounds: int) -> dict[str, float]:
    wall: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for sub in (False, True):  # a discarded round
        await live_turns(n, sub)
    for r in range(rounds):
        for sub in (False, True) if r % 2 == 0 else (True, False):
            w, c = await live_turns(n, sub)
            wall[sub].append(w)
            cpu[sub].append(c)
    none_w, one_w = statistics.median(wall[False]), statistics.median(wall[True])
    none_c, one_c = statistics.median(cpu[False]), statistics.median(cpu[True])
    return {
        "live_turns_per_s_none": none_w,
        "live_turns_per_s_one_subscriber": one_w,
        "subscriber_vs_none_wall": one_w / none_w,
        "subscriber_vs_none_cpu": one_c / none_c,
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--replies", type=int, default=30)
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    import logging

    logging.disable(logging.WARNING)
    out = asyncio.run(main(a.replies))
    out.update(asyncio.run(turn_rates(a.turns, a.rounds)))
    print(
        json.dumps(out)
        if a.json
        else "\n".join(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}" for k, v in out.items())
    )

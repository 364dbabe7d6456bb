"""Live replies on the Telegram fake (issue 12): time from the model's first output characters
to the first visible text, p50 and p99; edits per reply.

    python bench/live_bench.py [--replies 30] [--json]

Each reply is about 1,500 characters streamed by a slow in-process model (20 characters
every 10 ms, so about 0.75 s per reply) into ``telegram:send`` with ``live = true`` and
``live_interval = 0.2``, through the real python-telegram-bot client against the loopback
fake (extensions/telegram/tests/fake_telegram.py). "First visible" is when the fake received
the ``sendMessage`` that showed the reply's first words; the start is when the model yielded
the first characters inside ``<output>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "extensions" / "telegram" / "tests"))
from fake_telegram import FakeTelegram  # noqa: E402
from hub_telegram import TelegramSettings, extension  # noqa: E402

from hub import Hub, HubConfig  # noqa: E402
from hub.models import Model, ModelRequest, Usage  # noqa: E402

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
            ext = extension(TelegramSettings(
                token="123456:BENCH", base_url=f"{tg.base_url}/bot", live=True, live_interval=0.2,
                chat_rate=20, poll_timeout=5,
            ))
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


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--replies", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out = asyncio.run(main(a.replies))
    print(json.dumps(out) if a.json else "\n".join(f"{k}: {v:.1f}" if isinstance(v, float) else f"{k}: {v}" for k, v in out.items()))

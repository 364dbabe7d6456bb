"""Signal, message to reply on the loopback fake: from the frame written to the receive
websocket until the fake REST API received the reply's ``POST /v2/send``, median and p95.

    python bench/signal_bench.py [--messages 200] [--json]

The model is scripted (it answers at once), so the figure is the hub's own path: the frame
read from the websocket, the intake (recorded in the SQLite inbox), the run, the governor
and the ``/v2/send`` call over aiohttp. Each message comes from another user, so per-chat
pacing (``chat_rate``) does not enter; read receipts and typing are off (they are calls of
their own, off the reply's path).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from hub import Hub, ScriptedModel
from hub.testing import temp_config
from hub.testing.signal import NUMBER, FakeSignal
from hub_signal import SignalSettings, extension

ANSWER = '<response><output type="signal:message">pong</output></response>'


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


async def main(messages: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = temp_config(Path(tmp))
        async with FakeSignal() as sig:
            settings = SignalSettings(
                url=sig.base_url, number=NUMBER, typing=False, read_receipts=False, rate=(1000, 1.0)
            )
            model = ScriptedModel([], default=ANSWER)
            async with Hub(cfg, model=model, load_extensions=False, extensions=[extension(settings)]):
                await sig.wait_connected()
                times: list[float] = []
                for i in range(messages + 5):  # the first five warm up
                    user = f"+1555{i:07d}"
                    frame, _ = sig.message("ping", frm=user, uuid_=str(uuid.uuid4()))
                    start = time.monotonic()
                    assert await sig.deliver(frame) == 1
                    await sig.wait_for(lambda u=user: any(s["to"] == u for s in sig.sent), timeout=30)
                    done = next(r.at for r in reversed(sig.requests) if r.params.get("recipients") == [user])
                    if i >= 5:
                        times.append((done - start) * 1000)
    return {
        "messages": messages,
        "median_ms": round(statistics.median(times), 2),
        "p95_ms": round(pct(times, 0.95), 2),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(main(args.messages))
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"signal: message to reply, {result['messages']} messages: "
            f"median {result['median_ms']} ms, p95 {result['p95_ms']} ms"
        )

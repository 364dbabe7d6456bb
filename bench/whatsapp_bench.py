"""WhatsApp, message to reply on the loopback fake: from the start of Meta's signed webhook
POST to the hub's ``[http]`` endpoint until the fake Graph API received the reply's
``/messages`` call, median and p95, through the real ``pywa_async`` client.

    python bench/whatsapp_bench.py [--messages 200] [--json]

The model is scripted (it answers at once), so the figure is the hub's own path: signature
check, intake (recorded in the SQLite inbox before the 200), the run, the 24-hour window
check in the memory store, the governor and the Graph API call. Each message comes from
another user, so Meta's per-user pacing (``chat_rate``) does not enter; read receipts and
typing are off (they are calls of their own, off the reply's path).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from hub import Hub, ScriptedModel
from hub.config import HttpSection
from hub.testing import temp_config
from hub.testing.whatsapp import APP_SECRET, PHONE_NUMBER_ID, TOKEN, VERIFY_TOKEN, FakeWhatsApp
from hub_whatsapp import WhatsAppSettings, extension

ANSWER = '<response><output type="whatsapp:message">pong</output></response>'


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


async def main(messages: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = temp_config(Path(tmp))
        cfg.http = HttpSection(port=0)
        async with FakeWhatsApp() as wa:
            settings = WhatsAppSettings(
                phone_number_id=PHONE_NUMBER_ID,
                token=TOKEN,
                app_secret=APP_SECRET,
                verify_token=VERIFY_TOKEN,
                base_url=wa.base_url,
                typing=False,
                read_receipts=False,
            )
            model = ScriptedModel([], default=ANSWER)
            async with Hub(cfg, model=model, load_extensions=False, extensions=[extension(settings)]) as hub:
                assert hub.http is not None
                wa.webhook_url = f"http://127.0.0.1:{hub.http.port}/whatsapp"
                times: list[float] = []
                for i in range(messages + 5):  # the first five warm up
                    user = f"1555{i:07d}"
                    payload, _ = wa.message("ping", frm=user)
                    start = time.monotonic()
                    status, _ = await wa.deliver(payload)
                    assert status == 200
                    await wa.wait_for(lambda u=user: any(s["to"] == u for s in wa.sent), timeout=30)
                    done = next(r.at for r in reversed(wa.requests) if r.params.get("to") == user)
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
            f"whatsapp: message to reply, {result['messages']} messages: "
            f"median {result['median_ms']} ms, p95 {result['p95_ms']} ms"
        )

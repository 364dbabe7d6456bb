"""Two Telegram accounts (bots) served by two ``hub run`` workers on one PostgreSQL schema,
each bot polled under its own lease. The worker polling both is SIGKILLed while a run of
each account waits on the model: the other worker takes both bots over and resumes both
runs, and every message is answered once, by the bot it was sent to.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hub.testing import FakeOpenAI
from hub.testing.postgres import temporary_schema
from hub.testing.telegram import FakeTelegram

from .cluster import Worker, ack

pytestmark = [pytest.mark.timeout(120)]

MAIN = "111:accounts-main"
SUPPORT = "222:accounts-support"


def _config(root: Path, name: str, *, url: str, model: str, main: str, support: str) -> Path:
    path = root / f"{name}.toml"
    path.write_text(f"""
[hub]
data_dir = {json.dumps(str(root / name))}
contexts_dir = {json.dumps(str(root / "contexts"))}
shutdown_grace = 5
log_level = "INFO"

[store]
url = {json.dumps(url)}
lease = 3

[model]
provider = "openai"
name = "fake"
base_url = {json.dumps(model)}
api_key = "x"
max_retries = 0
timeout = 60

[memory]
episodes = false

[http]
host = "127.0.0.1"
port = 0

[extensions.telegram]
token = "{MAIN}"
base_url = {json.dumps(main)}
typing = false
poll_timeout = 1
lease_ttl = 2
chat_rate = 20

[extensions.telegram.accounts.support]
token = "{SUPPORT}"
base_url = {json.dumps(support)}
""")
    return path


async def _until(check: Any, what: str, workers: list[Worker], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {w.name}\n{w.tail(20)}" for w in workers)
            raise AssertionError(f"timed out waiting for {what}\n{logs}")
        await asyncio.sleep(0.05)


async def test_two_accounts_one_worker_killed_each_message_answered_once_by_its_own_bot(tmp_path: Path) -> None:
    (tmp_path / "contexts").mkdir()
    async with (
        temporary_schema() as url,
        FakeTelegram(bot_id=111, bot_username="main_bot", token=MAIN) as main,
        FakeTelegram(bot_id=222, bot_username="support_bot", token=SUPPORT) as support,
        FakeOpenAI(default=ack) as model,
    ):
        bots = {"main": main, "support": support}
        w0, w1 = (
            Worker(
                n,
                _config(
                    tmp_path,
                    n,
                    url=url,
                    model=model.url,
                    main=f"{main.base_url}/bot",
                    support=f"{support.base_url}/bot",
                ),
                tmp_path / f"{n}.log",
            )
            for n in ("w0", "w1")
        )
        workers = [w0, w1]
        await w0.start()
        try:
            # w0 holds both bots' leases before w1 exists
            await _until(lambda: main.calls("getUpdates") and support.calls("getUpdates"), "w0 polling", workers)
            await w1.start()

            def push(bot: str, n: int) -> None:
                bots[bot].push_message(chat_id=42, text=f"{bot}#{n}")

            def answered(bot: str) -> list[str]:
                return [m for s in bots[bot].sent for m in s["text"].split()[1:]]

            push("main", 0)
            push("support", 0)
            await _until(lambda: answered("main") and answered("support"), "the first answers", workers)
            # a run of each account waits on the model on w0 when w0 dies
            model.hang_next(2)
            before = len(model.bodies)
            push("main", 1)
            push("support", 1)
            await _until(lambda: len(model.bodies) >= before + 2, "both runs at the model", workers)
            w0.kill()
            await w0.proc.wait()  # type: ignore[union-attr]
            push("main", 2)
            push("support", 2)
            await _until(
                lambda: len(answered("main")) >= 3 and len(answered("support")) >= 3, "every message answered", workers
            )
        finally:
            codes = await asyncio.gather(*(w.stop() for w in workers))
        assert codes[1] == 0, w1.tail()
        for bot, fake in bots.items():
            # each message answered once, by the bot it was sent to, in the chat it came from
            counts = Counter(answered(bot))
            assert counts == Counter({f"{bot}#0": 1, f"{bot}#1": 1, f"{bot}#2": 1}), (bot, fake.sent)
            assert {s["chat_id"] for s in fake.sent} == {42}

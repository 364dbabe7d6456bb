"""The crash test: three ``hub run`` workers on one PostgreSQL schema take Telegram's webhook
POSTs behind a round-robin load balancer; one is SIGKILLed mid-run and started again. Every
message is answered exactly once, and each chat's replies come in the order of its messages.

The only duplicate allowed is the documented window: a send that reached Telegram but whose
record died with the killed worker (the output is in the fake's log, not in any run's event
log as sent). Such duplicates are counted and reported, and each must be one of those.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hub.testing import FakeOpenAI
from hub.testing.postgres import temporary_schema
from hub.testing.telegram import FakeTelegram

from .cluster import TOKEN, Balancer, Worker, ack, make_workers

pytestmark = [pytest.mark.timeout(240)]

CHATS = 100
PER_CHAT = 10
_ID = re.compile(r"c(\d+)#(\d+)")


async def _wait(check: Any, *, timeout: float, what: str, workers: list[Worker]) -> None:
    """Wait on state (polled), never a fixed sleep; a timeout shows the workers' logs."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {w.name}\n{w.tail(15)}" for w in workers)
            raise AssertionError(f"timed out waiting for {what}\n{logs}")
        await asyncio.sleep(0.1)


async def _db_state(url: str) -> tuple[int, int]:
    """(inputs not yet handled, runs still running) in the workers' schema."""
    import asyncpg

    base, _, query = url.partition("?")
    schema = query.split("search_path=", 1)[1]
    conn = await asyncpg.connect(base, server_settings={"search_path": schema})
    try:
        waiting = await conn.fetchval("SELECT COUNT(*) FROM inbox WHERE state NOT IN ('done', 'dead')")
        running = await conn.fetchval("SELECT COUNT(*) FROM runs WHERE state = 'running'")
        return int(waiting), int(running)
    finally:
        await conn.close()


async def _recorded_sends(url: str) -> Counter[str]:
    """Every message id in an output that a run's event log records as sent."""
    import asyncpg

    base, _, query = url.partition("?")
    schema = query.split("search_path=", 1)[1]
    conn = await asyncpg.connect(base, server_settings={"search_path": schema})
    try:
        rows = await conn.fetch("SELECT data FROM run_events WHERE kind = 'output'")
    finally:
        await conn.close()
    latest: dict[str, dict[str, Any]] = {}  # an output is logged again as its parts go out, then once sent
    for row in rows:
        entry = json.loads(row["data"])
        latest[entry["id"]] = entry
    found: Counter[str] = Counter()
    for entry in latest.values():
        # what the hub counts as answered (OutputLog.answered): sent, or a part of it sent
        if entry.get("type") == "telegram:send" and (
            entry.get("sent") or (entry.get("parts") and not entry.get("live"))
        ):
            found.update(f"c{c}#{n}" for c, n in _ID.findall(str(entry.get("content", ""))))
    return found


async def _inputs_of_killed_runs(url: str) -> set[str]:
    """The messages that runs cut off with their worker (``killed``/``abnormal_exit``) had taken."""
    import asyncpg

    base, _, query = url.partition("?")
    conn = await asyncpg.connect(base, server_settings={"search_path": query.split("search_path=", 1)[1]})
    try:
        rows = await conn.fetch(
            "SELECT e.data FROM run_events e JOIN runs r ON r.id = e.run_id"
            " WHERE e.kind = 'input' AND r.state = 'killed' AND r.reason = 'abnormal_exit'"
        )
    finally:
        await conn.close()
    return {str(json.loads(r["data"]).get("content")) for r in rows}


async def _story(url: str, context: str) -> str:
    """A conversation's runs and their inputs and outputs, for a failure's message."""
    import asyncpg

    base, _, query = url.partition("?")
    conn = await asyncpg.connect(base, server_settings={"search_path": query.split("search_path=", 1)[1]})
    try:
        lines = []
        for run in await conn.fetch("SELECT id, state, reason FROM runs WHERE context = $1 ORDER BY started", context):
            events = await conn.fetch("SELECT kind, data FROM run_events WHERE run_id = $1 ORDER BY seq", run["id"])
            shown = [
                f"{e['kind']}:{json.loads(e['data']).get('content')!r}:{json.loads(e['data']).get('sent')}"
                for e in events
                if e["kind"] in ("input", "output")
            ]
            lines.append(f"run {run['id'][:8]} {run['state']} {run['reason']}: {shown}")
        for row in await conn.fetch(
            "SELECT id, data, state, run_id, claimed_by FROM inbox WHERE context = $1 ORDER BY received", context
        ):
            lines.append(
                f"inbox {row['id'][:8]} {json.loads(row['data']).get('content')!r} {row['state']} run={str(row['run_id'])[:8]} by={row['claimed_by']}"
            )
        return "\n".join(lines)
    finally:
        await conn.close()


async def test_three_workers_one_killed_every_message_answered_once_in_order(tmp_path: Path) -> None:
    started = time.monotonic()
    async with (
        temporary_schema() as url,
        FakeTelegram(token=TOKEN) as tg,
        FakeOpenAI(default=ack, latency=0.2) as model,
    ):
        workers = make_workers(
            tmp_path,
            3,
            url=url,
            model_url=model.url,
            telegram_url=f"{tg.base_url}/bot",
            lease=10.0,
        )
        await asyncio.gather(*(w.start() for w in workers))
        try:
            updates: dict[int, list[dict[str, Any]]] = defaultdict(list)
            for n in range(PER_CHAT):
                for c in range(CHATS):
                    tg.push_message(chat_id=1000 + c, text=f"c{c}#{n}")
                    updates[c].append(tg.state.updates[-1])

            def answered() -> set[str]:
                return {m for s in tg.sent for m in (f"c{a}#{b}" for a, b in _ID.findall(s["text"]))}

            async with aiohttp.ClientSession() as session:
                lb = Balancer(workers, session)

                async def chat(c: int) -> None:
                    # one chat's messages in order, as Telegram delivers one chat's updates
                    for update in updates[c]:
                        await lb.post(update)

                feeding = asyncio.gather(*(chat(c) for c in range(CHATS)))
                victim = workers[1]
                await _wait(lambda: _true(len(tg.sent) >= 300), timeout=90, what="300 replies", workers=workers)
                victim.kill()
                killed_at = len(tg.sent)
                await victim.proc.wait()  # type: ignore[union-attr]
                await victim.start()
                await feeding
                total = CHATS * PER_CHAT

                async def all_answered() -> bool:
                    return len(answered()) == total

                await _wait(all_answered, timeout=120, what=f"all {total} messages answered", workers=workers)

                async def settled() -> bool:
                    waiting, running = await _db_state(url)
                    return waiting == 0 and running == 0

                await _wait(settled, timeout=60, what="the inbox drained and no run running", workers=workers)
        finally:
            codes = await asyncio.gather(*(w.stop() for w in workers))
        # the workers are gone: nothing more can be sent; what the fake holds is final
        assert codes == [0, 0, 0], [w.tail() for w in workers]

        sent_ids: Counter[str] = Counter()
        per_chat: dict[int, list[int]] = defaultdict(list)
        for s in tg.sent:
            ids = _ID.findall(s["text"])
            assert ids, f"a reply that answers no message: {s['text']!r}"
            for c, n in ids:
                assert int(s["chat_id"]) == 1000 + int(c), f"message c{c}#{n} answered in chat {s['chat_id']}"
                sent_ids[f"c{c}#{n}"] += 1
                per_chat[int(c)].append(int(n))
        recorded = await _recorded_sends(url)
        expected = {f"c{c}#{n}" for c in range(CHATS) for n in range(PER_CHAT)}
        assert set(sent_ids) == expected
        # a record of a send is never duplicated: every message was answered once as far as
        # the hub knows
        wrong = {m: (recorded[m], sent_ids[m]) for m in sorted(expected) if recorded[m] != 1}
        if wrong:
            chat = int(_ID.match(next(iter(wrong))).group(1))  # type: ignore[union-attr]
            texts = [s["text"] for s in tg.sent if int(s["chat_id"]) == 1000 + chat]
            story = await _story(url, f"telegram:chat:{1000 + chat}")
            raise AssertionError(
                f"{len(wrong)} messages recorded as answered 0 or 2+ times (recorded, sent): "
                f"{dict(list(wrong.items())[:20])}\nchat {chat} got {texts}\n{story}"
            )
        # a send the fake saw more often than the runs recorded is the window (its record
        # died with the killed worker); anything else twice is a bug
        window = {m: sent_ids[m] - recorded[m] for m in expected if sent_ids[m] != recorded[m]}
        assert all(extra == 1 for extra in window.values()), window
        cut_off = await _inputs_of_killed_runs(url)
        assert set(window) <= cut_off, (
            f"sent twice, but not by a run that died with its worker: {set(window) - cut_off}"
        )
        for c, ns in per_chat.items():
            firsts = list(dict.fromkeys(ns))  # a window duplicate repeats a message already sent
            if firsts != sorted(firsts):
                story = await _story(url, f"telegram:chat:{1000 + c}")
                raise AssertionError(f"chat {c} answered out of order: {ns}\n{story}")
        print(
            f"\ncrash test: {total} messages, {CHATS} chats, 3 workers, w1 killed after {killed_at} replies; "
            f"{len(tg.sent)} replies, {len(window)} duplicates in the send-record window, "
            f"{lb.retries} re-posts; {time.monotonic() - started:.1f}s"
        )


async def _true(value: bool) -> bool:
    return value

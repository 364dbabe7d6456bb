"""Outbound rate limits shared by workers (``[store] redis_url``): two governors, as two
workers have, sending to one chat through one Redis never exceed the per-chat rate together;
without the shared limiter they do (the control). A limiter that fails loses no message.

Redis is the machine's own at ``$HUB_TEST_REDIS`` (default ``redis://127.0.0.1:6379/0``);
when it does not answer the test is skipped, except under CI."""

from __future__ import annotations

import asyncio
import os
import secrets
import time

import pytest

from hub import HubConfig
from hub.config import StoreSection
from hub.platform import Governor, RateLimit, RedisLimiter

URL = os.environ.get("HUB_TEST_REDIS") or "redis://127.0.0.1:6379/0"


async def _redis() -> RedisLimiter:
    limiter = RedisLimiter(URL, namespace=f"hub-test-{secrets.token_hex(6)}")  # keys of its own; they expire
    try:
        await asyncio.wait_for(limiter.hit(RateLimit(1000, 1.0), "probe"), 5)
    except Exception as e:
        if os.environ.get("CI"):
            pytest.fail(f"Redis at {URL} is not reachable: {e} (CI is set: this test must run)")
        pytest.skip(f"Redis at {URL} is not reachable: {type(e).__name__}: {e}")
    return limiter


def _most_in_a_window(times: list[float], per: float) -> int:
    times = sorted(times)
    return max(sum(1 for u in times[i:] if u - t < per) for i, t in enumerate(times))


async def _two_workers_send(shared: RedisLimiter | None, n: int) -> list[float]:
    sent: list[float] = []

    async def send() -> None:
        sent.append(time.time())

    workers = [Governor("telegram", per_chat=RateLimit(3, 1.0), global_=None, shared=shared) for _ in range(2)]
    await asyncio.gather(*(workers[i % 2].send(42, send) for i in range(n)))
    return sent


async def test_two_governors_sharing_the_limiter_never_exceed_the_chat_rate_together() -> None:
    limiter = await _redis()
    try:
        sent = await _two_workers_send(limiter, 9)
        assert len(sent) == 9  # every message went out
        # 3 a second for the chat, across both: a moving window counted on the sends' clock
        # (a little slack for the hop to Redis between its check and the send)
        assert _most_in_a_window(sent, 0.95) <= 3, sorted(sent)
        assert max(sent) - min(sent) >= 1.9  # 9 at 3 a second take two windows at least
    finally:
        await limiter.close()
    # the control: each worker pacing alone sends 3 + 3 in the first second
    alone = await _two_workers_send(None, 6)
    assert _most_in_a_window(alone, 0.95) == 6


async def test_a_failing_limiter_loses_no_message() -> None:
    broken = RedisLimiter("redis://127.0.0.1:1/0")  # nothing listens there
    sent: list[int] = []

    async def send(i: int) -> None:
        sent.append(i)

    gov = Governor("telegram", per_chat=RateLimit(100, 1.0), global_=None, shared=broken)
    for i in range(3):
        await gov.send(7, lambda i=i: send(i))
    assert sent == [0, 1, 2]
    await broken.close()


def test_redis_url_is_validated_by_name() -> None:
    assert StoreSection(redis_url=" redis://127.0.0.1:6379/0 ").redis_url == "redis://127.0.0.1:6379/0"
    with pytest.raises(ValueError, match="redis_url"):
        StoreSection(redis_url="http://127.0.0.1:6379")
    assert HubConfig().store.redis_url == ""  # the default: each worker paces alone


def test_a_hub_with_redis_url_hands_its_limiter_to_every_governor(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from hub import Hub, ScriptedModel

    cfg = HubConfig()
    cfg.hub.data_dir = str(tmp_path)
    cfg.memory.episodes = False
    cfg.store.redis_url = URL
    hub = Hub(cfg, model=ScriptedModel(["ok"]), load_extensions=False)
    gov = Governor("telegram")
    gov.report_to(hub)  # what a platform does at start
    assert isinstance(hub.outbound_limiter, RedisLimiter) and gov.shared is hub.outbound_limiter
    plain = Hub(HubConfig(), model=ScriptedModel(["ok"]), load_extensions=False)
    assert plain.outbound_limiter is None

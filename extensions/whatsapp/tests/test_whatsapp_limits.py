"""Meta's rate limits through the shared governor: a pair rate limit (131056) pauses that user
and a throughput limit (130429) every send, each retried after a wait that grows while the
limit lasts (Meta sends no Retry-After); a send given up on is a failed output, never
reported as sent; a 5xx is retried; a refused token is final."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from test_whatsapp import running

from hub import OutputLog


def waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The waits the governor chose after each rate limit, as it logged them."""
    return [float(m) for m in re.findall(r"rate limited sending to \S+; retrying in ([0-9.]+)s", caplog.text)]


async def test_a_pair_rate_limit_waits_longer_each_time_then_sends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hub.platform")
    async with running(tmp_path, pair_wait=0.05, typing=False, read_receipts=False) as r:
        r.wa.fail_code(131056, count=2)
        await r.say("hi")
        (sent,) = await r.wa.wait_sent(1)
        (out,) = await r.wait_outputs(1)
    assert sent["text"] == "pong" and out.sent
    statuses = [c.status for c in r.wa.calls("messages")]
    assert statuses == [400, 400, 200]
    first, second = waits(caplog)
    assert 0.045 <= first <= 0.16 and 0.09 <= second <= 0.21  # 0.05, then 0.1 (and jitter): doubled


async def test_a_throughput_limit_pauses_every_send_and_a_5xx_is_retried(tmp_path: Path) -> None:
    async with running(tmp_path, throughput_wait=0.05, typing=False, read_receipts=False) as r:
        r.wa.fail_code(130429, count=1, status=400)
        r.wa.fail_code(1, count=1, status=500)
        await r.say("hi")
        (sent,) = await r.wa.wait_sent(1)
    assert [c.status for c in r.wa.calls("messages")] == [400, 500, 200]
    assert r.hub.metrics is not None


async def test_a_limit_that_outlasts_send_max_wait_is_a_failed_output(tmp_path: Path) -> None:
    async with running(
        tmp_path, pair_wait=0.05, send_max_wait=0.2, send_attempts=20, typing=False, read_receipts=False
    ) as r:
        r.wa.fail_code(131056, count=100)
        await r.say("hi")
        outs = await r.wait_outputs(1)
    out: OutputLog = outs[0]
    assert not out.sent and "131056" in str(out.error)
    assert len(r.wa.calls("messages")) < 10  # bounded: 0.05 + 0.1 + ... within 0.2 s


async def test_a_refused_token_is_final_not_retried(tmp_path: Path) -> None:
    async with running(tmp_path, typing=False, read_receipts=False) as r:
        r.wa.fail_code(190, count=1, status=401)
        await r.say("hi")
        (out,) = await r.wait_outputs(1)
        assert not out.sent and "190" in str(out.error)
        assert len(r.wa.calls("messages")) == 1

"""``hub run`` as a real process with ``[extensions.signal]``, against the loopback fake:
SIGKILLed after a message was recorded (and its read receipt sent) and before the model
answered, then started again: the message is answered once, and signal-cli's redelivery of
it afterwards (the same author and timestamp) is not answered a second time."""

from __future__ import annotations

import signal
from pathlib import Path

from hub.testing import FakeOpenAI
from hub.testing.processes import start_hub, stop_hub, until_model_asked, write_hub_config
from hub.testing.signal import NUMBER, USER, FakeSignal

ANSWER = '<response><output type="signal:message">answered</output></response>'
ENV = {"SIGNAL_NUMBER": NUMBER}


def _write_config(tmp_path: Path, sig: FakeSignal, model_url: str) -> Path:
    return write_hub_config(
        tmp_path,
        model_url=model_url,
        extension=f"""
[extensions.signal]
url = "{sig.base_url}"
number = "${{SIGNAL_NUMBER}}"
reconnect_max = 0.5
""",
    )


async def test_sigkill_between_receipt_and_answer_answers_once_after_restart(tmp_path: Path) -> None:
    async with FakeSignal() as sig, FakeOpenAI(default=ANSWER, latency=60) as ai:
        config = _write_config(tmp_path, sig, ai.url)
        hub = start_hub(tmp_path, config, ENV)
        try:
            await sig.wait_connected(1, timeout=30)
            frame, stamp = sig.message("answer me once")
            assert await sig.deliver(frame) == 1
            await sig.wait_for(lambda: bool(sig.state.receipts), timeout=20)  # recorded, then acknowledged
            await until_model_asked(ai, hub)  # the model is writing (FakeOpenAI holds its answer)
        finally:
            output = stop_hub(hub)
        assert not sig.sent, output

        ai.latency = 0.0
        hub = start_hub(tmp_path, config, ENV)
        try:
            (sent,) = await sig.wait_sent(1, timeout=30)  # resumed from the inbox
            assert sent["to"] == USER and sent["text"] == "answered"
            await sig.wait_connected(2, timeout=30)
            assert await sig.deliver(frame) == 1  # a late redelivery: not answered again
            sentinel, _ = sig.message("a sentinel", frm="+15550002222", uuid_="9f1d2c3b-0000-4000-8000-00000000000c")
            assert await sig.deliver(sentinel) == 1
            await sig.wait_sent(2, timeout=30)
        finally:
            output = stop_hub(hub, signal.SIGTERM)
        assert hub.returncode == 0, output
        assert [s["text"] for s in sig.sent] == ["answered", "answered"], output
        assert [s["to"] for s in sig.sent] == [USER, "+15550002222"]
        assert [r["timestamp"] for r in sig.state.receipts].count(stamp) == 1
        assert "answer me once" in ai.prompt(1) and "a sentinel" in ai.prompt(2)

"""``hub run`` as a real process with ``[extensions.signal]``, against the loopback fake:
SIGKILLed after a message was recorded (and its read receipt sent) and before the model
answered, then started again: the message is answered once, and signal-cli's redelivery of
it afterwards (the same author and timestamp) is not answered a second time."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from hub.testing import FakeOpenAI
from hub.testing.signal import NUMBER, USER, FakeSignal

ROOT = Path(__file__).resolve().parents[3]
ANSWER = '<response><output type="signal:message">answered</output></response>'


def _write_config(tmp_path: Path, sig: FakeSignal, model_url: str) -> Path:
    (tmp_path / "contexts").mkdir(exist_ok=True)
    config = tmp_path / "config.toml"
    config.write_text(
        f"""
[hub]
data_dir = "data"
contexts_dir = "contexts"
shutdown_grace = 1

[model]
provider = "openai"
name = "hub"
base_url = "{model_url}"
api_key = "x"
max_retries = 0

[memory]
episodes = false

[extensions.signal]
url = "{sig.base_url}"
number = "${{SIGNAL_NUMBER}}"
reconnect_max = 0.5
"""
    )
    return config


def _start_hub(tmp_path: Path, config: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SIGNAL_NUMBER": NUMBER}
    return subprocess.Popen(
        [sys.executable, "-m", "hub.cli", "run", "--config", str(config)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _output(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> str:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=5)
    return out.decode(errors="replace")


async def test_sigkill_between_receipt_and_answer_answers_once_after_restart(tmp_path: Path) -> None:
    async with FakeSignal() as sig, FakeOpenAI(default=ANSWER, latency=60) as ai:
        config = _write_config(tmp_path, sig, ai.url)
        hub = _start_hub(tmp_path, config)
        try:
            await sig.wait_connected(1, timeout=30)
            frame, stamp = sig.message("answer me once")
            assert await sig.deliver(frame) == 1
            await sig.wait_for(lambda: bool(sig.state.receipts), timeout=20)  # recorded, then acknowledged
            async with asyncio.timeout(20):  # the model is writing (FakeOpenAI holds its answer)
                while not ai.bodies:
                    await asyncio.sleep(0.05)
        finally:
            output = _output(hub)
        assert not sig.sent, output

        ai.latency = 0.0
        hub = _start_hub(tmp_path, config)
        try:
            (sent,) = await sig.wait_sent(1, timeout=30)  # resumed from the inbox
            assert sent["to"] == USER and sent["text"] == "answered"
            await sig.wait_connected(2, timeout=30)
            assert await sig.deliver(frame) == 1  # a late redelivery: not answered again
            sentinel, _ = sig.message("a sentinel", frm="+15550002222", uuid_="9f1d2c3b-0000-4000-8000-00000000000c")
            assert await sig.deliver(sentinel) == 1
            await sig.wait_sent(2, timeout=30)
        finally:
            output = _output(hub, signal.SIGTERM)
        assert hub.returncode == 0, output
        assert [s["text"] for s in sig.sent] == ["answered", "answered"], output
        assert [s["to"] for s in sig.sent] == [USER, "+15550002222"]
        assert [r["timestamp"] for r in sig.state.receipts].count(stamp) == 1
        assert "answer me once" in ai.prompt(1) and "a sentinel" in ai.prompt(2)

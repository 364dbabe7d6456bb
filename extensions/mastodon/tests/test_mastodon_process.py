"""``hub run`` as a real process with ``[extensions.mastodon]``, against the loopback fake:
SIGKILLed after a mention was recorded and before the model answered, then started again:
the mention is answered once, and the restart's reading of the notifications does not
answer it a second time."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from hub.testing import FakeOpenAI
from hub.testing.mastodon import FakeMastodon

ROOT = Path(__file__).resolve().parents[3]
ANSWER = '<response><output type="mastodon:reply">answered</output></response>'


def _write_config(tmp_path: Path, fake: FakeMastodon, model_url: str) -> Path:
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

[extensions.mastodon]
base_url = "{fake.base_url}"
access_token = "${{MASTODON_ACCESS_TOKEN}}"
dry_run = false
post_interval = 0
poll_interval = 5
"""
    )
    return config


def _start_hub(tmp_path: Path, config: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MASTODON_ACCESS_TOKEN": "test-token"}
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
    async with FakeMastodon() as fake, FakeOpenAI(default=ANSWER, latency=60) as ai:
        config = _write_config(tmp_path, fake, ai.url)
        hub = _start_hub(tmp_path, config)
        try:
            await fake.wait_for(lambda: fake.streams == 1, timeout=30)
            note = fake.mention("answer me once", username="alice")
            async with asyncio.timeout(20):  # recorded, and the model is writing (FakeOpenAI holds it)
                while not ai.bodies:
                    await asyncio.sleep(0.05)
        finally:
            output = _output(hub)
        assert not fake.sent, output

        ai.latency = 0.0
        hub = _start_hub(tmp_path, config)
        try:
            (sent,) = await fake.wait_sent(1, timeout=30)  # resumed from the inbox
            assert sent["text"] == "@alice answered" and sent["in_reply_to"] == note["status"]["id"]
            await fake.wait_for(lambda: fake.streams >= 1, timeout=30)
            fake.mention("a sentinel", username="bob", account_id="43")
            await fake.wait_sent(2, timeout=30)
        finally:
            output = _output(hub, signal.SIGTERM)
        assert hub.returncode == 0, output
        assert [s["in_reply_to"] for s in fake.sent].count(note["status"]["id"]) == 1, output
        assert "answer me once" in ai.prompt(1) and "a sentinel" in ai.prompt(2)

"""``hub run`` as a real process with ``[extensions.email]``, against a real Dovecot and SMTP
server: SIGKILLed after a mail was recorded and flagged read and before the model answered,
then started again: the mail is answered once, and the same mail delivered again afterwards
(a copy, the same Message-ID) is not answered a second time."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hub.testing import FakeOpenAI
from hub.testing.email import BOT, DOVECOT, PASSWORD, USER, Dovecot, SmtpSink, mail

pytestmark = pytest.mark.skipif(not Path(DOVECOT).exists(), reason="Dovecot is not installed (.ci/run installs it)")

ROOT = Path(__file__).resolve().parents[3]
ANSWER = '<response><output type="email:reply">answered</output></response>'


def _write_config(tmp_path: Path, dovecot: Dovecot, smtp: SmtpSink, model_url: str) -> Path:
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

[extensions.email]
imap_host = "127.0.0.1"
imap_port = {dovecot.port}
smtp_host = "127.0.0.1"
smtp_port = {smtp.port}
tls = "none"
username = "{BOT}"
password = "${{EMAIL_PASSWORD}}"
"""
    )
    return config


def _start_hub(tmp_path: Path, config: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EMAIL_PASSWORD": PASSWORD}
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
    async with Dovecot() as dovecot, SmtpSink() as smtp, FakeOpenAI(default=ANSWER, latency=60) as ai:
        config = _write_config(tmp_path, dovecot, smtp, ai.url)
        hub = _start_hub(tmp_path, config)
        raw, _ = mail("answer me once")
        try:
            await dovecot.deliver(raw)
            async with asyncio.timeout(30):  # recorded, then the model is writing (FakeOpenAI holds it)
                while not ai.bodies:
                    if hub.poll() is not None:
                        raise AssertionError(_output(hub))
                    await asyncio.sleep(0.05)
            async with asyncio.timeout(10):
                while await dovecot.seen() != [1]:  # flagged read: only after it was recorded
                    await asyncio.sleep(0.05)
        finally:
            output = _output(hub)
        assert not smtp.sent, output

        ai.latency = 0.0
        hub = _start_hub(tmp_path, config)
        try:
            (sent,) = await smtp.wait_sent(1, timeout=30)  # resumed from the inbox
            assert sent.recipients == [USER] and sent.text == "answered"
            await dovecot.deliver(raw)  # the same mail again (its Message-ID): not answered twice
            await dovecot.deliver(mail("a sentinel")[0])
            await smtp.wait_sent(2, timeout=30)
        finally:
            output = _output(hub, signal.SIGTERM)
        assert hub.returncode == 0, output
        assert [s.text for s in smtp.sent] == ["answered", "answered"], output
        assert "answer me once" in ai.prompt(1) and "a sentinel" in ai.prompt(2)
        assert len(ai.bodies) == 3
        assert PASSWORD not in output

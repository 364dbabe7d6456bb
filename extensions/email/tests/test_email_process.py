"""``hub run`` as a real process with ``[extensions.email]``, against a real Dovecot and SMTP
server: SIGKILLed after a mail was recorded and flagged read and before the model answered,
then started again: the mail is answered once, and the same mail delivered again afterwards
(a copy, the same Message-ID) is not answered a second time."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from hub.testing import FakeOpenAI
from hub.testing.email import BOT, DOVECOT, PASSWORD, USER, Dovecot, SmtpSink, mail
from hub.testing.processes import start_hub, stop_hub, until, until_model_asked, write_hub_config

pytestmark = pytest.mark.skipif(not Path(DOVECOT).exists(), reason="Dovecot is not installed (.ci/run installs it)")

ANSWER = '<response><output type="email:reply">answered</output></response>'
ENV = {"EMAIL_PASSWORD": PASSWORD}


def _write_config(tmp_path: Path, dovecot: Dovecot, smtp: SmtpSink, model_url: str) -> Path:
    return write_hub_config(
        tmp_path,
        model_url=model_url,
        extension=f"""
[extensions.email]
imap_host = "127.0.0.1"
imap_port = {dovecot.port}
smtp_host = "127.0.0.1"
smtp_port = {smtp.port}
tls = "none"
username = "{BOT}"
password = "${{EMAIL_PASSWORD}}"
""",
    )


async def _seen(dovecot: Dovecot, uids: list[int]) -> bool:
    return await dovecot.seen() == uids


async def test_sigkill_between_receipt_and_answer_answers_once_after_restart(tmp_path: Path) -> None:
    async with Dovecot() as dovecot, SmtpSink() as smtp, FakeOpenAI(default=ANSWER, latency=60) as ai:
        config = _write_config(tmp_path, dovecot, smtp, ai.url)
        hub = start_hub(tmp_path, config, ENV)
        raw, _ = mail("answer me once")
        try:
            await dovecot.deliver(raw)
            await until_model_asked(ai, hub)  # recorded, then the model is writing (FakeOpenAI holds it)
            await until(lambda: _seen(dovecot, [1]), hub, timeout=10)  # flagged read: only after it was recorded
        finally:
            output = stop_hub(hub)
        assert not smtp.sent, output

        ai.latency = 0.0
        hub = start_hub(tmp_path, config, ENV)
        try:
            (sent,) = await smtp.wait_sent(1, timeout=30)  # resumed from the inbox
            assert sent.recipients == [USER] and sent.text == "answered"
            await dovecot.deliver(raw)  # the same mail again (its Message-ID): not answered twice
            await dovecot.deliver(mail("a sentinel")[0])
            await smtp.wait_sent(2, timeout=30)
        finally:
            output = stop_hub(hub, signal.SIGTERM)
        assert hub.returncode == 0, output
        assert [s.text for s in smtp.sent] == ["answered", "answered"], output
        assert "answer me once" in ai.prompt(1) and "a sentinel" in ai.prompt(2)
        assert len(ai.bodies) == 3
        assert PASSWORD not in output

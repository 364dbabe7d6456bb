"""``hub run`` as a real process with ``[extensions.mastodon]``, against the loopback fake:
SIGKILLed after a mention was recorded and before the model answered, then started again:
the mention is answered once, and the restart's reading of the notifications does not
answer it a second time."""

from __future__ import annotations

import signal
from pathlib import Path

from hub.testing import FakeOpenAI
from hub.testing.mastodon import FakeMastodon
from hub.testing.processes import start_hub, stop_hub, until_model_asked, write_hub_config

ANSWER = '<response><output type="mastodon:reply">answered</output></response>'
ENV = {"MASTODON_ACCESS_TOKEN": "test-token"}


def _write_config(tmp_path: Path, fake: FakeMastodon, model_url: str) -> Path:
    return write_hub_config(
        tmp_path,
        model_url=model_url,
        extension=f"""
[extensions.mastodon]
base_url = "{fake.base_url}"
access_token = "${{MASTODON_ACCESS_TOKEN}}"
dry_run = false
post_interval = 0
poll_interval = 5
""",
    )


async def test_sigkill_between_receipt_and_answer_answers_once_after_restart(tmp_path: Path) -> None:
    async with FakeMastodon() as fake, FakeOpenAI(default=ANSWER, latency=60) as ai:
        config = _write_config(tmp_path, fake, ai.url)
        hub = start_hub(tmp_path, config, ENV)
        try:
            await fake.wait_for(lambda: fake.streams == 1, timeout=30)
            note = fake.mention("answer me once", username="alice")
            await until_model_asked(ai, hub)  # recorded, and the model is writing (FakeOpenAI holds it)
        finally:
            output = stop_hub(hub)
        assert not fake.sent, output

        ai.latency = 0.0
        hub = start_hub(tmp_path, config, ENV)
        try:
            (sent,) = await fake.wait_sent(1, timeout=30)  # resumed from the inbox
            assert sent["text"] == "@alice answered" and sent["in_reply_to"] == note["status"]["id"]
            await fake.wait_for(lambda: fake.streams >= 1, timeout=30)
            fake.mention("a sentinel", username="bob", account_id="43")
            await fake.wait_sent(2, timeout=30)
        finally:
            output = stop_hub(hub, signal.SIGTERM)
        assert hub.returncode == 0, output
        assert [s["in_reply_to"] for s in fake.sent].count(note["status"]["id"]) == 1, output
        assert "answer me once" in ai.prompt(1) and "a sentinel" in ai.prompt(2)

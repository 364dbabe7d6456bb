"""``hub run`` as a real process with ``[extensions.whatsapp]``, against the loopback fake:
SIGKILLed after a webhook was answered 200 (so Meta will not deliver it again) and before the
model answered, then started again: the message is answered once, and Meta's redelivery of
it afterwards is not answered a second time."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path
from typing import Any

from hub.testing import FakeOpenAI
from hub.testing.processes import free_port, start_hub, stop_hub, until, until_model_asked, write_hub_config
from hub.testing.whatsapp import APP_SECRET, PHONE_NUMBER_ID, TOKEN, USER, VERIFY_TOKEN, FakeWhatsApp

ANSWER = '<response><output type="whatsapp:message">answered</output></response>'
ENV = {
    "WHATSAPP_PHONE_NUMBER_ID": PHONE_NUMBER_ID,
    "WHATSAPP_TOKEN": TOKEN,
    "WHATSAPP_APP_SECRET": APP_SECRET,
    "WHATSAPP_VERIFY_TOKEN": VERIFY_TOKEN,
}


def _write_config(tmp_path: Path, wa: FakeWhatsApp, model_url: str, port: int) -> Path:
    return write_hub_config(
        tmp_path,
        model_url=model_url,
        http_port=port,
        extension=f"""
[extensions.whatsapp]
phone_number_id = "${{WHATSAPP_PHONE_NUMBER_ID}}"
token = "${{WHATSAPP_TOKEN}}"
app_secret = "${{WHATSAPP_APP_SECRET}}"
verify_token = "${{WHATSAPP_VERIFY_TOKEN}}"
base_url = "{wa.base_url}"
""",
    )


async def _taken(wa: FakeWhatsApp, payload: dict[str, Any]) -> bool:
    """Deliver ``payload`` as Meta does: a 503 (the webhook is served before the input takes
    messages) is delivered again; 200 means recorded."""
    status = (await wa.deliver(payload))[0]
    assert status in (200, 503), status
    return status == 200


async def _listening(wa: FakeWhatsApp) -> bool:
    """Whether the hub answers Meta's GET check (its webhook is served)."""
    with contextlib.suppress(OSError):
        return (await wa.verify(VERIFY_TOKEN))[0] == 200
    return False


async def test_sigkill_between_receipt_and_answer_answers_once_after_restart(tmp_path: Path) -> None:
    port = free_port()
    async with (
        FakeWhatsApp(webhook_url=f"http://127.0.0.1:{port}/whatsapp") as wa,
        FakeOpenAI(default=ANSWER, latency=60) as ai,
    ):
        config = _write_config(tmp_path, wa, ai.url, port)
        hub = start_hub(tmp_path, config, ENV)
        try:
            await until(lambda: _listening(wa), hub)
            payload, wamid = wa.message("answer me once")
            await until(lambda: _taken(wa, payload), hub)  # recorded: Meta will not send it again
            await until_model_asked(ai, hub)  # the model is writing (FakeOpenAI holds its answer)
        finally:
            output = stop_hub(hub)
        assert not wa.sent, output

        ai.latency = 0.0
        hub = start_hub(tmp_path, config, ENV)
        try:
            (sent,) = await wa.wait_sent(1, timeout=30)  # resumed from the inbox
            assert sent["to"] == USER and sent["text"] == "answered"
            await until(lambda: _listening(wa), hub)
            await until(lambda: _taken(wa, payload), hub)  # a late redelivery: not answered again
            sentinel, _ = wa.message("a sentinel")
            await until(lambda: _taken(wa, sentinel), hub)
            await wa.wait_sent(2, timeout=30)
        finally:
            output = stop_hub(hub, signal.SIGTERM)
        assert hub.returncode == 0, output
        assert [s["text"] for s in wa.sent] == ["answered", "answered"], output
        assert "answer me once" in ai.prompt(1) and "a sentinel" in ai.prompt(2)
        assert TOKEN not in output and APP_SECRET not in output and VERIFY_TOKEN not in output

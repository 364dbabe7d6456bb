"""WhatsApp's 24-hour customer-service window: answers go inside it as free-form messages; a
message the bot starts outside it (a schedule, a webhook) goes through the configured
template or is skipped with a log line, never retried; a ``failed`` status with 131047
closes the window and the message goes once more through the template."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from test_whatsapp import running

from hub import OutputLog
from hub.testing.whatsapp import USER, WINDOW
from hub_whatsapp import MARGIN

TEMPLATE = "follow_up"


def outputs(result: object) -> list[OutputLog]:
    return [e for e in getattr(result, "logs", []) if isinstance(e, OutputLog)]


async def test_an_answer_is_free_form_inside_the_window(tmp_path: Path) -> None:
    async with running(tmp_path, template=TEMPLATE) as r:
        await r.say("hi")
        (sent,) = await r.wa.wait_sent(1)
        assert sent["type"] == "text" and "failed" not in sent


async def test_a_message_outside_the_window_goes_through_the_template(tmp_path: Path) -> None:
    async with running(tmp_path, template=TEMPLATE, template_language="en_GB") as r:
        result = await r.hub.send("whatsapp:chat", {"wa_id": USER}, "the daily reminder is due")
        (sent,) = r.wa.sent
        assert sent["type"] == "template" and sent["template"] == TEMPLATE and sent["language"] == "en_GB"
        assert sent["components"] == [{"type": "body", "parameters": [{"type": "text", "text": "pong"}]}]
        (out,) = outputs(result)
        assert out.sent and out.data["template"] == TEMPLATE


async def test_a_message_outside_the_window_without_a_template_is_skipped_with_a_log_line_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hub_whatsapp")
    async with running(tmp_path) as r:
        # the user wrote 25 hours ago: their window has closed
        payload, _ = r.wa.message("an old message", at=time.time() - WINDOW - 3600)
        assert (await r.wa.deliver(payload))[0] == 200
        result = await r.hub.send("whatsapp:chat", {"wa_id": USER}, "the daily reminder is due")
        outs = outputs(result)  # the model is told it was not sent, and may try once more: the same
        assert outs and all(not o.sent and "24-hour" in str(o.error) for o in outs)
        assert "window is closed and no template is configured" in caplog.text
        await r.say("a sentinel")  # the user writes: the window opens, the answer goes out
        sent = await r.wa.wait_sent(1)
        # the old message's answer was skipped, as was the reminder: nothing retried them
        assert [s["type"] for s in sent] == ["text"] and len(sent) == 1
        assert all(s["type"] != "template" for s in r.wa.sent)


async def test_the_last_minutes_of_the_window_count_as_closed(tmp_path: Path) -> None:
    async with running(tmp_path, template=TEMPLATE) as r:
        payload, _ = r.wa.message("late", at=time.time() - WINDOW + MARGIN / 2)
        assert (await r.wa.deliver(payload))[0] == 200
        (sent,) = await r.wa.wait_sent(1)
        assert sent["type"] == "template"


async def test_a_failed_status_131047_closes_the_window_and_resends_once_through_the_template(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hub_whatsapp")
    async with running(tmp_path, template=TEMPLATE) as r:
        payload, _ = r.wa.message("hi")
        r.wa.state.last_inbound[USER] = time.time() - WINDOW - 60  # Meta's clock says it closed
        assert (await r.wa.deliver(payload))[0] == 200
        sent = await r.wa.wait_sent(2)
        assert sent[0]["type"] == "text" and sent[0]["failed"] == 131047
        assert sent[1]["type"] == "template" and sent[1]["components"][0]["parameters"][0]["text"] == "pong"
        assert "131047" in caplog.text
        # the window is closed now: the next message the bot starts goes straight to the template
        await r.hub.send("whatsapp:chat", {"wa_id": USER}, "a reminder")
        sent = await r.wa.wait_sent(3)
        assert sent[2]["type"] == "template" and len(sent) == 3
        # Meta redelivers the failed status: it is not resent again
        status = r.wa.state.statuses[0]
        assert (await r.wa.deliver(status))[0] == 200
        await r.say("a sentinel")
        sent = await r.wa.wait_sent(4)
        assert sent[3]["type"] == "text" and len(sent) == 4

"""Durable intake and access on WhatsApp: a webhook is answered 200 only once its messages
are recorded (503 otherwise, and Meta delivers it again), a poison message is parked with
its secrets masked at its third failure, and allow-lists, ``dm_policy`` with pairing, the
loop guard and the text commands decide who reaches the model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_whatsapp import running

from hub import StoreError
from hub.logs import InputLog
from hub.store import InMemoryInbox
from hub.testing.whatsapp import TOKEN, USER
from hub_whatsapp import PARK_AFTER


class FailingInbox(InMemoryInbox):
    """An inbox whose next ``failures`` records fail, as a store outage does."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def record(self, context: str, entry: InputLog) -> bool:
        if self.failures:
            self.failures -= 1
            raise StoreError("the inbox is down (injected)", store="inbox", operation="write")
        return await super().record(context, entry)


async def test_a_webhook_the_store_could_not_record_is_answered_503_and_taken_when_delivered_again(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, inbox=FailingInbox(1)) as r:
        payload, wamid = r.wa.message("keep me")
        status, body = await r.wa.deliver(payload)
        assert status == 503 and "delivers it again" in body
        assert not await r.hub.received(f"whatsapp:{wamid}")
        assert (await r.wa.deliver(payload))[0] == 200  # Meta's retry
        (sent,) = await r.wa.wait_sent(1)
        assert sent["text"] == "pong"


async def test_a_poison_message_is_answered_503_then_parked_with_its_secrets_masked_and_intake_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHATSAPP_TOKEN", TOKEN)  # a secret the hub knows, as from the config
    async with running(tmp_path) as r:
        # a text message without its body: a shape the intake cannot read, every time
        payload, wamid = r.wa.message(kind="text", extra={"text": {"leak": f"my token is {TOKEN}"}})
        statuses = [(await r.wa.deliver(payload))[0] for _ in range(PARK_AFTER)]
        assert statuses == [503] * (PARK_AFTER - 1) + [200]
        (parked,) = await r.hub.inbox.parked()
        assert parked.entry.platform_id == f"whatsapp:{wamid}" and parked.failures == PARK_AFTER
        assert parked.context == f"whatsapp:chat:{USER}"
        assert TOKEN not in repr(parked) and "my token is" in str(parked.entry.content)
        assert (await r.wa.deliver(payload))[0] == 200  # parked: Meta's next retry is acknowledged
        await r.say("a sentinel")
        (sent,) = await r.wa.wait_sent(1)
        assert "a sentinel" in str(r.model.requests[-1].messages[-1]["content"]) and len(r.model.requests) == 1


async def test_a_webhook_of_several_messages_takes_the_good_ones_though_one_is_poison(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        payload, _ = r.wa.message("first")
        bad, bad_id = r.wa.message(kind="text", extra={"text": None})
        good2, _ = r.wa.message("second", frm="15550002222")
        value = payload["entry"][0]["changes"][0]["value"]
        value["messages"] += bad["entry"][0]["changes"][0]["value"]["messages"]
        value["messages"] += good2["entry"][0]["changes"][0]["value"]["messages"]
        value["contacts"] += good2["entry"][0]["changes"][0]["value"]["contacts"]
        assert (await r.wa.deliver(payload))[0] == 503
        await r.wa.wait_sent(2)
        assert sorted(s["to"] for s in r.wa.sent) == sorted([USER, "15550002222"])
        for _ in range(PARK_AFTER - 1):
            await r.wa.deliver(payload)  # the good ones are redeliveries now: not answered again
        (parked,) = await r.hub.inbox.parked()
        assert parked.entry.platform_id == f"whatsapp:{bad_id}"
        await r.say("a sentinel")
        await r.wa.wait_sent(3)
        assert len(r.wa.sent) == 3


# --- who may talk to the bot --------------------------------------------------------------


async def test_allowed_users_lets_only_those_numbers_in(tmp_path: Path) -> None:
    async with running(tmp_path, allowed_users=[f"+{USER}"]) as r:
        await r.say("not allowed", frm="15559999999")
        await r.say("allowed")
        (sent,) = await r.wa.wait_sent(1)
        assert sent["to"] == USER and len(r.model.requests) == 1


async def test_dm_policy_pairing_sends_a_code_once_and_answers_after_approval(tmp_path: Path) -> None:
    stranger = "15557777777"
    async with running(tmp_path, dm_policy="pairing") as r:
        await r.say("hello?", frm=stranger)
        (code_msg,) = await r.wa.wait_sent(1)
        assert code_msg["to"] == stranger and "hub pairing approve" in code_msg["text"]
        await r.say("hello again?", frm=stranger)  # told once: not again
        assert not r.model.requests
        code = re.search(r"hub pairing approve (\S+)", code_msg["text"])
        assert code is not None
        await r.hub.access.approve(code.group(1).strip("`.'\""))
        await r.say("now?", frm=stranger)
        sent = await r.wa.wait_sent(2)
        assert sent[1]["text"] == "pong" and len(sent) == 2


async def test_the_loop_guard_stops_answering_a_bot_number(tmp_path: Path) -> None:
    bot = "15558888888"
    async with running(tmp_path, bots=[f"+{bot}"], loop_guard_turns=2) as r:
        for i in range(4):
            await r.say(f"bot says {i}", frm=bot)
        await r.say("a human sentinel")
        await r.wa.wait_for(lambda: any(s["to"] == USER for s in r.wa.sent))
        assert sum(s["to"] == bot for s in r.wa.sent) == 2


# --- commands -----------------------------------------------------------------------------


async def test_help_new_and_stop_are_answered_as_text_commands_without_the_model(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        await r.say("/help")
        (help_msg,) = await r.wa.wait_sent(1)
        assert "/new" in help_msg["text"] and "/stop" in help_msg["text"]
        await r.say("hello")
        await r.wa.wait_sent(2)
        await r.say("/new")
        await r.wa.wait_sent(3)
        await r.say("/stop")
        await r.wa.wait_sent(4)
        assert len(r.model.requests) == 1  # only "hello" reached the model
        assert "hello" in str(r.model.requests[0].messages[-1]["content"])

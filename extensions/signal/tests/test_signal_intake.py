"""Durable intake and access on Signal: a frame is acknowledged to the user (the read
receipt, typing) only once it is recorded, and retried in order while the store is down; a
poison frame is parked with its secrets masked at its third failure and intake goes on;
allow-lists, ``dm_policy`` with pairing, the loop guard and the text commands decide who
reaches the model."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from test_signal import running

from hub import StoreError
from hub.logs import InputLog
from hub.store import InMemoryInbox
from hub.testing.signal import USER, USER_UUID
from hub_signal import PARK_AFTER

SECRET = "sk-signal-test-secret-0123456789"


class FailingInbox(InMemoryInbox):
    """An inbox whose next ``failures`` records fail, as a store outage does; it notes what
    the fake had received from the bot at each record, to show what came before it."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.attempts = 0

    async def record(self, context: str, entry: InputLog) -> bool:
        self.attempts += 1
        if self.failures:
            self.failures -= 1
            raise StoreError("the inbox is down (injected)", store="inbox", operation="write")
        return await super().record(context, entry)


async def test_nothing_acknowledges_a_message_before_it_is_recorded_and_it_is_taken_when_the_store_is_back(
    tmp_path: Path,
) -> None:
    inbox = FailingInbox(2)
    async with running(tmp_path, inbox=inbox) as r:
        stamp = await r.say("keep me")
        other = "+15550002222"
        later = await r.say("and me, after it", frm=other, uuid_="9f1d2c3b-0000-4000-8000-000000000009")
        sent = await r.sig.wait_sent(2)
        assert inbox.attempts == 4  # two failed records, then both messages
        # in order, each answered once, and each read receipt after its record
        assert [s["to"] for s in sent] == [USER, other]
        await r.sig.wait_for(lambda: len(r.sig.state.receipts) == 2)
        assert [x["timestamp"] for x in r.sig.state.receipts] == [stamp, later]
        assert not await r.hub.inbox.parked()  # a store outage parks nothing


async def test_a_read_receipt_is_never_sent_for_a_message_not_recorded(tmp_path: Path) -> None:
    inbox = FailingInbox(10_000)  # the store stays down
    async with running(tmp_path, inbox=inbox, reconnect_max=0.1) as r:
        await r.say("unrecorded")
        async with asyncio.timeout(5):
            while inbox.attempts < 3:  # tried again and again: the store is the only thing waited on
                await asyncio.sleep(0.01)
        assert not r.sig.state.receipts and not r.sig.state.typing and not r.sig.sent


async def test_a_poison_frame_is_parked_with_its_secrets_masked_and_intake_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIGNAL_PROXY_TOKEN", SECRET)  # a secret the hub knows, as from the config
    async with running(tmp_path) as r:
        # an attachment without its id: a shape the intake cannot read, every time
        stamp = await r.say(f"my token is {SECRET}", attachments=[{"contentType": "image/png", "size": 3}])
        await r.say("a sentinel")
        (sent,) = await r.sig.wait_sent(1)
        (parked,) = await r.hub.inbox.parked()
        assert parked.entry.platform_id == f"signal:{USER_UUID}:{stamp}" and parked.failures == PARK_AFTER
        assert parked.context == f"signal:chat:{USER_UUID}"
        assert SECRET not in repr(parked) and "my token is" in str(parked.entry.content)
        assert "a sentinel" in str(r.model.requests[-1].messages[-1]["content"]) and len(r.model.requests) == 1
        assert stamp not in [x["timestamp"] for x in r.sig.state.receipts]  # never acknowledged


async def test_a_frame_that_is_not_json_is_parked_and_intake_goes_on(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        assert await r.sig.deliver("{not json") == 1
        await r.say("a sentinel")
        await r.sig.wait_sent(1)
        (parked,) = await r.hub.inbox.parked()
        assert parked.entry.platform_id.startswith("signal:frame:") and "{not json" in str(parked.entry.content)


# --- who may talk to the bot --------------------------------------------------------------


async def test_allowed_users_lets_only_those_numbers_in(tmp_path: Path) -> None:
    async with running(tmp_path, allowed_users=[USER]) as r:
        await r.say("not allowed", frm="+15559999999", uuid_="9f1d2c3b-0000-4000-8000-000000000001")
        await r.say("allowed")
        (sent,) = await r.sig.wait_sent(1)
        assert sent["to"] == USER and len(r.model.requests) == 1


async def test_allowed_users_takes_a_uuid_for_a_user_who_hides_their_number(tmp_path: Path) -> None:
    async with running(tmp_path, allowed_users=[USER_UUID]) as r:
        await r.say("hidden number", frm=None)
        (sent,) = await r.sig.wait_sent(1)
        assert sent["to"] == USER_UUID


async def test_dm_policy_pairing_sends_a_code_once_and_answers_after_approval(tmp_path: Path) -> None:
    stranger, stranger_uuid = "+15557777777", "9f1d2c3b-0000-4000-8000-000000000002"
    async with running(tmp_path, dm_policy="pairing") as r:
        await r.say("hello?", frm=stranger, uuid_=stranger_uuid)
        (code_msg,) = await r.sig.wait_sent(1)
        assert code_msg["to"] == stranger and "hub pairing approve" in code_msg["text"]
        await r.say("hello again?", frm=stranger, uuid_=stranger_uuid)  # told once: not again
        code = re.search(r"hub pairing approve (\S+)", code_msg["text"])
        assert code is not None
        await r.hub.access.approve(code.group(1).strip("`.'\""))
        await r.say("now?", frm=stranger, uuid_=stranger_uuid)
        sent = await r.sig.wait_sent(2)
        assert sent[1]["text"] == "pong" and len(sent) == 2 and len(r.model.requests) == 1
        assert not [x for x in r.sig.state.receipts if x["recipient"] == stranger][1:]  # only the answered one


async def test_the_loop_guard_stops_answering_a_bot_number(tmp_path: Path) -> None:
    bot, bot_uuid = "+15558888888", "9f1d2c3b-0000-4000-8000-000000000003"
    async with running(tmp_path, bots=[bot], loop_guard_turns=2) as r:
        for i in range(2):
            await r.say(f"bot says {i}", frm=bot, uuid_=bot_uuid)
            await r.sig.wait_sent(i + 1)
        for i in range(2, 4):
            await r.say(f"bot says {i}", frm=bot, uuid_=bot_uuid)
        await r.say("a human sentinel")
        await r.sig.wait_for(lambda: any(s["to"] == USER for s in r.sig.sent))
        assert sum(s["to"] == bot for s in r.sig.sent) == 2


# --- commands -----------------------------------------------------------------------------


async def test_help_new_and_stop_are_answered_as_text_commands_without_the_model(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        await r.say("/help")
        (help_msg,) = await r.sig.wait_sent(1)
        assert "/new" in help_msg["text"] and "/stop" in help_msg["text"]
        await r.say("hello")
        await r.sig.wait_sent(2)
        await r.say("/new")
        await r.sig.wait_sent(3)
        await r.say("/stop")
        await r.sig.wait_sent(4)
        assert len(r.model.requests) == 1  # only "hello" reached the model
        assert "hello" in str(r.model.requests[0].messages[-1]["content"])


async def test_messages_not_recorded_when_the_hub_stops_are_counted_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = FailingInbox(10_000)  # the store stays down: nothing can be recorded
    async with running(tmp_path, inbox=inbox) as r:
        await r.say("first")
        await r.say("second", frm="+15550002222", uuid_="9f1d2c3b-0000-4000-8000-00000000000d")
        async with asyncio.timeout(5):
            while inbox.attempts < 2:
                await asyncio.sleep(0.01)
    assert "2 message(s) read from the websocket were not recorded before the receiver stopped" in caplog.text

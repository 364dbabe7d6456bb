"""``dm_policy`` on Telegram, against the loopback fake: who may talk to the bot in private."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from test_telegram import running

from hub import ConfigError, HubError
from hub.config import config_from_dict
from hub.definitions import load_extension
from hub.testing.telegram import FakeTelegram

pytestmark = [pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")]

CODE = re.compile(r"hub pairing approve ([A-Z2-9]{8})\b")


async def test_pairing_sends_a_code_and_nothing_reaches_the_model_until_approved(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok", dm_policy="pairing") as h:
            tg.push_message(chat_id=42, text="hello, who are you?")
            (sent,) = await tg.wait_sent(1)
            assert sent["chat_id"] == 42
            match = CODE.search(sent["text"])
            assert match is not None, sent["text"]
            code = match.group(1)
            tg.push_message(chat_id=42, text="still me")  # told the code already: no second reply
            await h.idle()
            pending = await h.hub.access.list()
            assert [(p.platform, p.user, p.state) for p in pending] == [("telegram", "42", "pending")]
            approved = await h.hub.access.approve(code)
            assert (approved.platform, approved.user, approved.state) == ("telegram", "42", "approved")
            tg.push_message(chat_id=42, text="and now?")
            (result,) = await h.wait_results(1)
            await h.idle()
            # the two messages before the approval never became inputs, nor model requests
            assert [e.content for e in h.inputs()] == ["and now?"]
            assert len(h.model.requests) == 1 and result.ok
            assert [s["text"] for s in tg.sent[1:]] == ["ok"]


async def test_an_unknown_user_is_told_the_code_once_however_often_they_write(tmp_path: Path) -> None:
    """Issue 24, finding 9: every message from an unknown user got its own reply, so strangers
    could make the bot send as fast as chat_rate allows. Now: once per code lifetime."""
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok", dm_policy="pairing") as h:
            for i in range(20):
                tg.push_message(chat_id=42, text=f"spam {i}")
            await h.idle()  # all twenty decided
            (sent,) = await tg.wait_sent(1)
            (pending,) = await h.hub.access.list()
            assert CODE.search(sent["text"]).group(1) == pending.code  # type: ignore[union-attr]
            assert len(tg.calls("sendMessage")) == 1 and h.model.requests == [] and h.inputs() == []


async def test_the_code_is_sent_off_the_intake_path(tmp_path: Path) -> None:
    """A code whose send waits (a 429's retry_after) does not hold up the poller: a message
    that came after it is answered first."""
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok", dm_policy="pairing") as h:
            tg.fail_next("sendMessage", status=429, retry_after=3)
            tg.push_message(chat_id=42, text="who are you?")
            tg.push_message(chat_id=-100, text="@test_bot hello", from_id=7, chat_type="supergroup")
            sent = await tg.wait_sent(2, timeout=10)
            assert sent[0]["chat_id"] == -100 and sent[0]["text"] == "ok"
            assert sent[1]["chat_id"] == 42 and CODE.search(sent[1]["text"])
            assert len(h.model.requests) == 1  # the group's message; the stranger's reached no model


async def test_pairing_is_for_private_chats_allowed_users_need_none(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok", dm_policy="pairing", allowed_users=["@ann"]) as h:
            tg.push_message(chat_id=9, text="ann in private", username="ann")
            tg.push_message(
                chat_id=-100, text="@test_bot ann in a group", from_id=9, username="ann", chat_type="supergroup"
            )
            tg.push_message(chat_id=-100, text="@test_bot a stranger in a group", from_id=8, chat_type="supergroup")
            await h.wait_results(2)
            await h.idle()
            assert sorted(e.content for e in h.inputs()) == ["@test_bot ann in a group", "ann in private"]
            assert await h.hub.access.list() == []  # nobody was asked to pair
            assert [s["text"] for s in tg.sent] == ["ok", "ok"]


async def test_allowlist_refuses_others_in_private_without_a_word(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok", dm_policy="allowlist", allowed_users=[7]) as h:
            tg.push_message(chat_id=8, text="a stranger in private")
            tg.push_message(chat_id=7, text="seven in private")  # the sentinel, taken after the stranger's
            (result,) = await h.wait_results(1)
            await h.idle()
            assert [e.content for e in h.inputs()] == ["seven in private"]
            assert len(h.model.requests) == 1
            assert [(s["chat_id"], s["text"]) for s in tg.sent] == [(7, "ok")]  # no code, no reply to 8
            assert await h.hub.access.list() == []


async def test_allowlist_with_no_users_lets_nobody_in_private_but_groups_are_as_before(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok", dm_policy="allowlist") as h:
            tg.push_message(chat_id=8, text="private")
            tg.push_message(chat_id=-100, text="@test_bot in a group", from_id=8, chat_type="supergroup")
            await h.wait_results(1)
            await h.idle()
            assert [e.content for e in h.inputs()] == ["@test_bot in a group"]
            assert [s["chat_id"] for s in tg.sent] == [-100]


async def test_open_is_todays_behaviour(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok", dm_policy="open") as h:
            tg.push_message(chat_id=8, text="a stranger in private")
            await h.wait_results(1)
            assert [e.content for e in h.inputs()] == ["a stranger in private"]
            assert [s["text"] for s in tg.sent] == ["ok"]
            assert await h.hub.access.list() == []


async def test_a_pairing_code_that_cannot_be_sent_is_drawn_again_with_the_next_message(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok", dm_policy="pairing", send_attempts=1) as h:
            tg.fail_next("sendMessage", status=403)  # given up on: no retry
            tg.push_message(chat_id=42, text="first")
            await tg.wait_for(lambda: len(tg.calls("sendMessage")) == 1)
            (lost,) = await h.hub.access.list()
            async with asyncio.timeout(5):  # the undelivered code is retracted
                while not (await h.hub.access.list())[0].expired():
                    await asyncio.sleep(0.01)
            tg.push_message(chat_id=42, text="second")
            (sent,) = await tg.wait_sent(1)
            await h.idle()
            (pending,) = await h.hub.access.list()
            assert CODE.search(sent["text"]).group(1) == pending.code != lost.code  # type: ignore[union-attr]
            assert [c.status for c in tg.calls("sendMessage")] == [403, 200]
            assert h.model.requests == [] and h.inputs() == []


def test_dm_policy_is_validated_naming_the_key() -> None:
    cfg = config_from_dict({}, env={})
    with pytest.raises(ConfigError, match=r"extensions\.telegram\.dm_policy") as caught:
        load_extension("telegram", {"token": "1:x", "dm_policy": "friends"}, cfg)
    assert "'open', 'allowlist', 'pairing'" in str(caught.value) and "'friends'" in str(caught.value)
    for policy in ("open", "allowlist", "pairing"):
        load_extension("telegram", {"token": "1:x", "dm_policy": policy}, cfg)


async def test_a_pairing_store_that_fails_loses_no_message(tmp_path: Path) -> None:
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, default="ok", dm_policy="pairing") as h:
            store = h.hub.access.store
            real_get, failures = store.get, []

            async def failing_get(platform: str, user: str) -> Any:
                if not failures:
                    failures.append(user)
                    raise HubError("database is locked")
                return await real_get(platform, user)

            store.get = failing_get  # type: ignore[method-assign]
            update_id, _ = tg.push_message(chat_id=42, text="hello")
            # the update is not confirmed while it is undecided; the poller retries it
            (sent,) = await tg.wait_sent(1)
            await h.idle()
            assert failures == ["42"] and len(tg.sent) == 1  # one code: decided once
            (pending,) = await h.hub.access.list()
            assert CODE.search(sent["text"]).group(1) == pending.code  # type: ignore[union-attr]
            assert tg.confirmed_offset == update_id + 1
            assert h.model.requests == [] and h.inputs() == []


@pytest.mark.parametrize(
    ("table", "warned"),
    [
        ({"dm_policy": "pairing"}, True),  # the case: groups bypass pairing
        ({"dm_policy": "allowlist"}, True),
        ({"dm_policy": "pairing", "allowed_users": ["@me"]}, False),
        ({"dm_policy": "pairing", "groups": "off"}, False),
        ({"dm_policy": "open"}, False),
    ],
)
def test_hub_check_warns_when_groups_bypass_a_pairing_policy(
    tmp_path: Path, table: dict[str, Any], warned: bool
) -> None:
    from hub.cli import check_config

    (tmp_path / "contexts").mkdir()
    cfg = config_from_dict(
        {"hub": {"contexts_dir": str(tmp_path / "contexts")}, "extensions": {"telegram": {"token": "1:x", **table}}}
    )
    report = check_config(cfg)
    found = [w for w in report.warnings if "extensions.telegram.dm_policy" in w]
    assert bool(found) == warned, report.warnings
    if warned:
        assert "anyone who mentions the bot in a group" in found[0] and "allowed_users" in found[0]
    assert not report.errors

"""``dm_policy`` on Discord, against the loopback fake: who may talk to the bot in DMs.

Messages are taken one at a time in arrival order, so a sentinel answered after a refused
message shows that the refused one was decided (and never reached the model).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_discord import running

from hub.config import config_from_dict
from hub.definitions import load_extension
from hub.errors import ConfigError
from hub.testing.discord import FakeDiscord

CODE = re.compile(r"hub pairing approve ([A-Z2-9]{8})\b")
STRANGER = 1300000000000000003


async def test_pairing_sends_a_code_and_nothing_reaches_the_model_until_approved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeDiscord() as dc:
        stranger = dc.add_user(STRANGER, "mallory")
        dm = dc.add_dm_channel(stranger)
        async with running(tmp_path, monkeypatch, dc=dc, dm_policy="pairing") as r:
            first = dc.push_message(dm, "hello, who are you?", author_id=stranger)
            (sent,) = await dc.wait_sent(1)
            assert sent["channel_id"] == dm
            match = CODE.search(sent["content"])
            assert match is not None, sent["content"]
            code = match.group(1)
            again = dc.push_message(dm, "hello? hello?", author_id=stranger)  # told already: no second code
            # guild channels are not private: a mention there is answered as before
            sentinel = await r.sentinel()
            assert await r.recorded(first, again, sentinel) == [False, False, True]
            assert [s["channel_id"] for s in dc.sent].count(dm) == 1
            assert len(r.model.requests) == 1
            (pending,) = await r.hub.access.list()
            assert (pending.platform, pending.user, pending.state) == ("discord", str(stranger), "pending")
            assert (pending.user_name, pending.user_handle) == ("mallory", "mallory")  # who asked, for the operator

            await r.hub.access.approve(code)
            after = dc.push_message(dm, "and now?", author_id=stranger)
            await dc.wait_for(lambda: bool(r.replies_to(after)))
            assert r.replies_to(after)[0]["content"] == "pong"
            assert await r.recorded(first, after) == [False, True]
            assert len(r.model.requests) == 2


async def test_allowlist_refuses_others_in_dms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeDiscord() as dc:
        stranger = dc.add_user(STRANGER, "mallory")
        stranger_dm = dc.add_dm_channel(stranger)
        async with running(tmp_path, monkeypatch, dc=dc, dm_policy="allowlist", allowed_users=[dc.user_id]) as r:
            refused = dc.push_message(stranger_dm, "let me in", author_id=stranger)
            ok = await r.sentinel(dc.dm_channel_id)  # alice, on allowed_users, in her DM
            assert [(s["channel_id"], s["reply_to"]) for s in dc.sent] == [(dc.dm_channel_id, ok)]
            assert await r.recorded(refused) == [False]
            assert len(r.model.requests) == 1
            assert await r.hub.access.list() == []


async def test_allowlist_with_no_users_keeps_dms_shut_and_guilds_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path, monkeypatch, dm_policy="allowlist") as r:
        dm = r.dc.push_message(r.dc.dm_channel_id, "hello?")
        await r.sentinel()
        assert await r.recorded(dm) == [False] and len(r.dc.sent) == 1


async def test_open_is_todays_behaviour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeDiscord() as dc:
        stranger = dc.add_user(STRANGER, "mallory")
        stranger_dm = dc.add_dm_channel(stranger)
        async with running(tmp_path, monkeypatch, dc=dc, dm_policy="open") as r:
            mid = dc.push_message(stranger_dm, "hello", author_id=stranger)
            await dc.wait_for(lambda: bool(r.replies_to(mid)))
            assert [s["content"] for s in dc.sent] == ["pong"]
            assert await r.hub.access.list() == []


def test_dm_policy_is_validated_naming_the_key() -> None:
    cfg = config_from_dict({}, env={})
    with pytest.raises(ConfigError, match=r"extensions\.discord\.dm_policy") as caught:
        load_extension("discord", {"token": "t", "dm_policy": "paring"}, cfg)
    assert "'open', 'allowlist', 'pairing'" in str(caught.value)

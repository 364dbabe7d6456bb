"""``dm_policy`` on X: mentions are public, so "allowlist" applies to them and "pairing" is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_twitter import bot

from hub import ConfigError
from hub.config import config_from_dict
from hub.definitions import load_extension
from hub.testing.twitter import FakeTwitter


async def test_allowlist_answers_only_allowed_users_mentions(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        stranger = tw.push_mention("@hubbot hi", author_id="43", author_username="bob")
        alice = tw.push_mention("@hubbot hi too", author_id="42", author_username="Alice")
        async with bot(tw, tmp_path, dm_policy="allowlist", allowed_users=["@alice"]) as b:
            await b.runs(1)
            await b.bot.poll()  # a second poll: the stranger's mention was passed over, not pending
            assert [s["in_reply_to"] for s in tw.sent] == [alice]
            assert len(b.model.requests) == 1
            # mentions are recorded as they are taken, in order: the stranger's never was
            assert [await b.hub.received(f"twitter:{t}") for t in (stranger, alice)] == [False, True]


async def test_allowlist_with_no_users_answers_nobody(tmp_path: Path) -> None:
    async with FakeTwitter() as tw:
        stranger = tw.push_mention("@hubbot hi", author_id="43", author_username="bob")
        async with bot(tw, tmp_path, dm_policy="allowlist") as b:
            await b.bot.poll()  # the first poll (at start) decided it; this one finds nothing new
            assert not await b.hub.received(f"twitter:{stranger}")
            assert tw.sent == [] and b.model.requests == []


def test_pairing_is_refused_on_x_with_the_reason() -> None:
    def load(table: dict[str, Any]) -> Any:
        cfg = config_from_dict({"extensions": {"twitter": table}}, env={})
        return load_extension("twitter", cfg.extensions["twitter"], cfg)

    with pytest.raises(ConfigError, match=r"extensions\.twitter\.dm_policy.*public"):
        load({"bearer_token": "b", "user_id": "1", "dm_policy": "pairing"})
    with pytest.raises(ConfigError, match=r"extensions\.twitter\.dm_policy"):
        load({"bearer_token": "b", "user_id": "1", "dm_policy": "closed"})
    assert load({"bearer_token": "b", "user_id": "1", "dm_policy": "allowlist"}).name == "twitter"

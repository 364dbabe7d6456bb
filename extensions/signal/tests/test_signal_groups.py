"""Signal groups: the bot answers a mention of it (by number or by UUID), a reply quoting
one of its messages and a reaction to one, every message of a group in ``groups``, and
nothing else; the answer goes to the group (``group.…``) and quotes the message answered;
``allowed_groups`` and ``allowed_users`` apply."""

from __future__ import annotations

from pathlib import Path

from test_signal import answer, running

from hub.testing.signal import BOT_UUID, GROUP, GROUP_INTERNAL, NUMBER, USER, USER_UUID, group_of
from hub_signal import group_id

OTHER_GROUP = "ZmFrZS1ncm91cC1pZC10aGF0LWlzLTMyLWJ5dGVzISE="  # base64 of 32 bytes


async def test_a_mention_in_a_group_is_answered_in_the_group_quoting_it(tmp_path: Path) -> None:
    async with running(tmp_path, [answer("hello group")]) as r:
        await r.say("chatting among ourselves", group=GROUP_INTERNAL)
        stamp = await r.say("what is 2+2?", group=GROUP_INTERNAL, mention_bot=True)
        (sent,) = await r.sig.wait_sent(1)
        assert sent["to"] == GROUP and sent["text"] == "hello group"
        assert sent["quote"] == {"timestamp": stamp, "author": USER, "text": "what is 2+2?"}
        prompt = str(r.model.requests[0].messages[-1]["content"])
        assert "what is 2+2?" in prompt and "\ufffc" not in prompt and "chatting among" not in prompt
        runs = await r.hub.runs.list(limit=5)
        assert [run.context for run in runs] == [f"signal:chat:{GROUP}"]
        await r.sig.wait_for(lambda: bool(r.sig.state.receipts))
        assert r.sig.state.receipts[0]["recipient"] == USER  # the receipt goes to the author


async def test_a_mention_by_uuid_alone_is_recognised_once_the_bots_uuid_is_known(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        # the bot's UUID shows in a mention that carries its number too (signal-cli resolves its own)
        await r.say("first", group=GROUP_INTERNAL, mention_bot=True)
        await r.sig.wait_sent(1)
        by_uuid = [{"name": "Hub", "uuid": BOT_UUID, "start": 0, "length": 1}]
        await r.say("\ufffc and now?", group=GROUP_INTERNAL, mentions=by_uuid)
        await r.sig.wait_sent(2)
        assert "and now?" in str(r.model.requests[1].messages[-1]["content"])


async def test_a_reply_quoting_the_bot_is_answered_and_other_mentions_are_written_out(tmp_path: Path) -> None:
    async with running(tmp_path, [answer("first"), answer("second")]) as r:
        await r.say("hi", group=GROUP_INTERNAL, mention_bot=True)
        (first,) = await r.sig.wait_sent(1)
        ann = [
            {
                "name": "Ann",
                "number": "+15550003333",
                "uuid": "9f1d2c3b-0000-4000-8000-00000000000a",
                "start": 4,
                "length": 1,
            }
        ]
        await r.say("ask \ufffc too", group=GROUP_INTERNAL, quote=r.sig.quote_of(first), mentions=ann)
        await r.sig.wait_sent(2)
        assert "ask @Ann too" in str(r.model.requests[1].messages[-1]["content"])


async def test_a_group_in_groups_is_answered_without_a_mention(tmp_path: Path) -> None:
    async with running(tmp_path, groups=[GROUP]) as r:
        await r.say("no mention needed", group=GROUP_INTERNAL)
        (sent,) = await r.sig.wait_sent(1)
        assert sent["to"] == GROUP


async def test_allowed_groups_and_allowed_users_apply_in_groups(tmp_path: Path) -> None:
    async with running(tmp_path, allowed_groups=[group_of(OTHER_GROUP)], allowed_users=[USER]) as r:
        await r.say("not this group", group=GROUP_INTERNAL, mention_bot=True)
        await r.say("not this user", frm="+15559999999", uuid_="9f1d2c3b-0000-4000-8000-00000000000b")
        await r.say("a sentinel")
        (sent,) = await r.sig.wait_sent(1)
        assert sent["to"] == USER and len(r.model.requests) == 1


async def test_a_reaction_to_the_bots_message_is_an_input_and_others_are_not(tmp_path: Path) -> None:
    async with running(tmp_path) as r:
        await r.say("hi")
        (first,) = await r.sig.wait_sent(1)
        mine = {
            "emoji": "❤️",
            "targetAuthor": NUMBER,
            "targetAuthorNumber": NUMBER,
            "targetAuthorUuid": BOT_UUID,
            "targetSentTimestamp": first["timestamp"],
            "isRemove": False,
        }
        theirs = {**mine, "targetAuthor": USER, "targetAuthorNumber": USER, "targetAuthorUuid": USER_UUID}
        await r.say(None, reaction=theirs)
        await r.say(None, reaction=mine)
        await r.sig.wait_sent(2)
        assert len(r.model.requests) == 2
        assert f"reacted ❤️ to your message {first['timestamp']}" in str(r.model.requests[1].messages[-1]["content"])


async def test_the_bot_reacts_and_quotes_in_a_direct_chat_when_asked(tmp_path: Path) -> None:
    async with running(tmp_path, [answer("noted", react="👍")], quote="always") as r:
        stamp = await r.say("remember this")
        (sent,) = await r.sig.wait_sent(1)
        (out,) = await r.wait_outputs(1)
    assert r.sig.state.reactions == [{"recipient": USER, "reaction": "👍", "target_author": USER, "timestamp": stamp}]
    assert sent["quote"]["timestamp"] == stamp and out.data["reply_to"] == stamp


def test_group_ids_are_taken_in_either_form() -> None:
    assert group_id(GROUP_INTERNAL) == GROUP == group_id(GROUP)


async def test_a_reaction_the_api_refuses_does_not_stop_the_reply(tmp_path: Path) -> None:
    async with running(tmp_path, [answer("still here", react="👍")]) as r:
        r.sig.fail_next("reaction", status=400, description="Failed to send reaction")
        await r.say("hello")
        (sent,) = await r.sig.wait_sent(1)
        (out,) = await r.wait_outputs(1)
    assert sent["text"] == "still here" and out.sent
    assert out.data["reaction"]["sent"] is False and not r.sig.state.reactions

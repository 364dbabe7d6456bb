"""Who may talk to the bot on Matrix: pairing in direct rooms, allowed users and rooms, and
the loop guard between bots, with the real matrix-nio client against the fake homeserver."""

from __future__ import annotations

import re
from pathlib import Path

from matrix_harness import ANN, BOB, running

from hub.testing.matrix import FakeMatrix

CODE = re.compile(r"hub pairing approve ([A-Z2-9]{8})\b")


async def test_pairing_sends_a_code_in_the_direct_room_and_nothing_reaches_the_model_until_approved(
    tmp_path: Path,
) -> None:
    async with FakeMatrix() as hs:
        stranger = hs.create_room([], bot_joined=False)
        async with running(tmp_path, hs, default="ok", dm_policy="pairing", allowed_users=[ANN]) as h:
            hs.invite(stranger, BOB, direct=True)  # a direct invite from anyone: joined, to tell the code
            await hs.wait_for(lambda: stranger in hs.state.joined)
            hs.state.rooms[stranger]["members"].insert(0, BOB)
            hs.push_text(stranger, BOB, "hello, who are you?")
            (sent,) = await hs.wait_sent(1)
            match = CODE.search(sent["content"]["body"])
            assert sent["room_id"] == stranger and match is not None, sent
            hs.push_text(stranger, BOB, "still me")  # told the code already: no second reply
            await h.synced()
            pending = await h.hub.access.list()
            assert [(p.platform, p.user, p.state) for p in pending] == [("matrix", BOB, "pending")]
            await h.hub.access.approve(match.group(1))
            hs.push_text(stranger, BOB, "and now?")
            (result,) = await h.wait_results(1)
            assert [e.content for e in h.inputs()] == ["and now?"] and result.ok
            assert hs.texts(stranger)[1:] == ["ok"]


async def test_allowed_rooms_and_users_leave_the_others_unanswered(tmp_path: Path) -> None:
    async with FakeMatrix() as hs:
        allowed = hs.create_room([ANN, BOB])
        other = hs.create_room([ANN, BOB])
        async with running(tmp_path, hs, default="ok", allowed_rooms=[allowed], allowed_users=[ANN]) as h:
            hs.push_text(other, ANN, "in another room", mention=True)
            hs.push_text(allowed, BOB, "from bob", mention=True)
            hs.push_text(allowed, ANN, "from ann", mention=True)
            await h.wait_inputs(1)
            await h.synced()
            assert [e.content for e in h.inputs()] == ["from ann"]
            assert [s["room_id"] for s in hs.sent] == [allowed]


async def test_the_loop_guard_stops_answering_another_bot(tmp_path: Path) -> None:
    other_bot = "@otherbot:example.org"
    async with FakeMatrix() as hs:
        room = hs.create_room([other_bot])
        async with running(tmp_path, hs, default="ok", bots=[other_bot], loop_guard_turns=2) as h:
            for i in range(4):
                hs.push_text(room, other_bot, f"bot says {i}")
                if i < 2:
                    await h.wait_inputs(i + 1)
            await h.synced()
            hs.push_text(room, ANN, "a human resets it")  # not in the room's members: still a message
            await h.wait_inputs(3)
            assert [e.content for e in h.inputs()] == ["bot says 0", "bot says 1", "a human resets it"]


async def test_the_encrypted_room_notice_goes_only_to_a_sender_let_in(tmp_path: Path) -> None:
    from hub_matrix import ENCRYPTED_NOTICE

    encrypted = {"type": "m.room.encrypted", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN, BOB], encrypted=True)
        plain = hs.create_room([ANN, BOB])
        async with running(tmp_path, hs, default="ok", allowed_users=[ANN]) as h:
            hs.push_event(room, {**encrypted, "sender": BOB})  # not on allowed_users: not told anything
            hs.push_text(plain, ANN, "sentinel", mention=True)
            await h.wait_results(1)
            assert hs.texts(room) == []
            hs.push_event(room, {**encrypted, "sender": ANN})
            await hs.wait_sent(2)
            assert hs.texts(room) == [ENCRYPTED_NOTICE]


async def test_a_strangers_direct_invite_draws_the_pairing_code_before_a_second_room_is_joined(
    tmp_path: Path,
) -> None:
    async with FakeMatrix() as hs:
        first = hs.create_room([BOB], bot_joined=False)
        second = hs.create_room([BOB], bot_joined=False)
        async with running(tmp_path, hs, default="ok", dm_policy="pairing", allowed_users=[ANN]) as h:
            hs.invite(first, BOB, direct=True)
            (sent,) = await hs.wait_sent(1)  # told at once, in the room it joined to tell it
            assert sent["room_id"] == first and CODE.search(sent["content"]["body"])
            hs.invite(second, BOB, direct=True)  # told already: nothing to join a room for
            await hs.wait_for(lambda: second in hs.state.left)
            assert second not in hs.state.joined
            assert [(p.user, p.state) for p in await h.hub.access.list()] == [(BOB, "pending")]


async def test_invites_past_max_rooms_are_declined(tmp_path: Path) -> None:
    async with FakeMatrix() as hs:
        hs.create_room([ANN])
        rooms = [hs.create_room([ANN], bot_joined=False) for _ in range(3)]
        async with running(tmp_path, hs, default="ok", max_rooms=2) as h:
            await h.synced()
            for room in rooms:
                hs.invite(room, ANN)
            await hs.wait_for(lambda: len(hs.state.joined) + len(hs.state.left) == 3)
            assert hs.state.joined == rooms[:1] and hs.state.left == rooms[1:]

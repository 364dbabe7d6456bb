"""The Matrix extension, with the real matrix-nio client against a loopback fake homeserver.

No mocks: each test runs a Hub with the extension's own sync loop and sender against
``hub.testing.matrix.FakeMatrix`` and a scripted model (or, for the SIGKILL test, a real
``hub run`` subprocess and the fake OpenAI server).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from matrix_harness import ANN, BOB, reply, running

from hub import ExtensionError, Hub, ScriptedModel, StoreError
from hub.logs import InputLog
from hub.platform import Backoff
from hub.store import InMemoryInbox
from hub.testing import temp_config
from hub.testing.matrix import BOT, FakeMatrix
from hub_matrix import (
    ENCRYPTED_NOTICE,
    MAX_EVENT_BYTES,
    MAX_LENGTH,
    TOKEN_KEY,
    MatrixSettings,
    extension,
    wire_len,
)
from hub_matrix._intake import PARK_AFTER


async def test_a_direct_message_in_a_reply_out(tmp_path: Path) -> None:
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        async with running(tmp_path, hs, [reply("Hello, **Ann**!")]) as h:
            event = hs.push_text(room, ANN, "hi there")
            (sent,) = await hs.wait_sent(1)
            content = sent["content"]
            assert sent["room_id"] == room and content["body"] == "Hello, **Ann**!"
            assert content["format"] == "org.matrix.custom.html"
            assert content["formatted_body"] == "<p>Hello, <strong>Ann</strong>!</p>"
            assert content["m.relates_to"] == {"m.in_reply_to": {"event_id": event["event_id"]}}
            assert content["m.mentions"] == {"user_ids": [ANN]}
            (result,) = await h.wait_results(1)
            assert result.ok and result.context == f"matrix:room:{room}"
            (entry,) = h.inputs()
            assert entry.content == "hi there" and entry.user == ANN and entry.type == "matrix:sync"
            assert entry.platform_id == f"matrix:{event['event_id']}"
            assert entry.meta == {"event_id": event["event_id"], "room_id": room, "sender": ANN, "direct": True}
            assert room in hs.state.typing
            await h.synced()
            assert await h.hub.memory.get(TOKEN_KEY + BOT) == f"s{hs.state.position}"


def body_of(n: int) -> str:
    """About ``n`` characters of paragraphs, some with non-ASCII (escaped on the wire)."""
    paragraphs, size, i = [], 0, 0
    while size < n:
        p = f"Paragraph {i}: " + " ".join(f"wörd{i}.{j}" for j in range(30))
        paragraphs.append(p)
        size += len(p) + 2
        i += 1
    return "\n\n".join(paragraphs)


async def test_a_long_reply_is_split_under_the_event_limit_in_order(tmp_path: Path) -> None:
    body = body_of(40_000)
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        async with running(tmp_path, hs, [reply(body)]) as h:
            event = hs.push_text(room, ANN, "tell me everything")
            (result,) = await h.wait_results(1, timeout=30)
            (out,) = result.outputs
            assert out.sent, out.error
            sent = [s for s in hs.sent if s["type"] == "m.room.message"]
            assert len(sent) >= 3 and all(wire_len(s["content"]["body"]) <= MAX_LENGTH for s in sent)
            assert all(len(json.dumps(s["content"])) <= MAX_EVENT_BYTES for s in sent)
            assert "\n\n".join(s["content"]["body"] for s in sent) == body, "nothing lost, in order"
            assert sent[0]["content"]["m.relates_to"] == {"m.in_reply_to": {"event_id": event["event_id"]}}
            assert all("m.relates_to" not in s["content"] for s in sent[1:]), "only the first part quotes"
            assert out.data["event_ids"] == [s["event_id"] for s in sent]
            assert [p["data"] for p in out.parts] == out.data["event_ids"]


async def test_a_429_storm_is_waited_out_and_each_message_sent_once(tmp_path: Path) -> None:
    async with FakeMatrix() as hs:
        rooms = [hs.create_room([f"@u{i}:example.org"]) for i in range(3)]
        async with running(tmp_path, hs, default="answered", send_attempts=10) as h:
            hs.fail_next("send", status=429, retry_after=0.2, count=6)
            hs.fail_next("sync", status=429, retry_after=0.2, count=2)
            started = time.monotonic()
            for i, room in enumerate(rooms):
                hs.push_text(room, f"@u{i}:example.org", f"question {i}")
            results = await h.wait_results(3, timeout=30)
            assert all(r.ok and r.outputs[0].sent for r in results), [r.outputs[0].error for r in results]
            assert sorted(s["room_id"] for s in hs.sent) == sorted(rooms), "each answered once"
            sends = hs.calls("send")
            assert [r.status for r in sends].count(429) == 6
            assert time.monotonic() - started >= 0.2 * 2, "retry_after_ms was honoured"
            assert (
                h.hub.metrics.registry.get_sample_value("hub_platform_rate_limited_total", {"platform": "matrix"}) == 6
            )


async def test_sync_resumes_from_the_kept_token_after_a_restart_and_answers_nothing_twice(tmp_path: Path) -> None:
    config = temp_config(tmp_path)
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        token = hs.token()
        async with running(tmp_path, hs, default="first answer", config=config, access_token=token) as h:
            hs.push_text(room, ANN, "before the restart")
            await h.wait_results(1)
            await h.synced()
            kept = await h.hub.memory.get(TOKEN_KEY + BOT)
        hs.push_text(room, ANN, "while the bot was down")
        syncs_before = len(hs.state.syncs)
        async with running(tmp_path, hs, default="second answer", config=config, access_token=token) as h:
            (result,) = await h.wait_results(1)
            assert [e.content for e in h.inputs()] == ["while the bot was down"]
            assert hs.state.syncs[syncs_before] == kept, "the first sync after the restart resumes from the kept token"
            await h.synced()
        assert hs.texts(room) == ["first answer", "second answer"]


async def test_a_room_id_with_colons_keeps_its_conversation_across_a_restart(tmp_path: Path) -> None:
    config = temp_config(tmp_path)
    room_id = "!room:matrix.example.org:8448"
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN], room_id=room_id)
        async with running(tmp_path, hs, default="noted", config=config) as h:
            hs.push_text(room, ANN, "my name is Ann")
            await h.wait_results(1)
        model = ScriptedModel(default="you are Ann")
        async with running(tmp_path, hs, model=model, config=config) as h:
            hs.push_text(room, ANN, "what is my name?")
            (result,) = await h.wait_results(1)
            assert result.ok and result.context == f"matrix:room:{room_id}"
            prompt = model.requests[-1].messages[0]["content"]
            assert "my name is Ann" in prompt and "what is my name?" in prompt, "the same conversation"
        assert hs.texts(room) == ["noted", "you are Ann"]


async def test_group_rooms_answer_mentions_and_watched_rooms_only(tmp_path: Path) -> None:
    async with FakeMatrix() as hs:
        group = hs.create_room([ANN, BOB])
        watched = hs.create_room([ANN, BOB])
        async with running(tmp_path, hs, default="ok", rooms=[watched]) as h:
            hs.push_text(group, ANN, "just chatting")
            hs.push_text(group, ANN, "hubbot: are you there?")  # the name first: a mention
            hs.push_text(group, BOB, "and you?", mention=True)
            hs.push_text(group, BOB, "a notice", msgtype="m.notice")
            hs.push_text(watched, ANN, "anything goes here")
            await h.wait_inputs(3)
            await h.synced()
            assert sorted(e.content for e in h.inputs()) == ["and you?", "anything goes here", "hubbot: are you there?"]


async def test_invites_are_joined_from_allowed_users_and_declined_from_others(tmp_path: Path) -> None:
    async with FakeMatrix() as hs:
        friend = hs.create_room([ANN], bot_joined=False)
        stranger = hs.create_room([BOB], bot_joined=False)
        async with running(tmp_path, hs, default="hello", allowed_users=[ANN]) as h:
            hs.invite(friend, ANN, direct=True)
            hs.invite(stranger, BOB, direct=True)
            await hs.wait_for(lambda: friend in hs.state.joined and stranger in hs.state.left)
            assert stranger not in hs.state.joined
            await h.synced()
            hs.push_text(friend, ANN, "thanks for joining")
            (result,) = await h.wait_results(1)
            assert result.context == f"matrix:room:{friend}" and hs.texts(friend) == ["hello"]


async def test_an_encrypted_room_is_told_once_that_it_is_not_supported(tmp_path: Path, caplog) -> None:
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN], encrypted=True)
        async with running(tmp_path, hs) as h:
            for _ in range(2):
                hs.push_event(
                    room,
                    {"type": "m.room.encrypted", "sender": ANN, "content": {"algorithm": "m.megolm.v1.aes-sha2"}},
                )
            plain = hs.create_room([ANN])
            hs.push_text(plain, ANN, "sentinel")  # taken after the two encrypted ones
            await h.wait_results(1)
            assert hs.texts(room) == [ENCRYPTED_NOTICE] and hs.texts(plain) == ["ok"]
            assert await h.hub.memory.get(f"matrix:encrypted-told:{room}")
        assert any("end-to-end encrypted" in r.getMessage() for r in caplog.records)


async def test_a_plaintext_message_in_an_encrypted_room_is_refused_as_an_encrypted_one(tmp_path: Path) -> None:
    # A client may send in clear in a room whose state says it is encrypted: answering in
    # clear there would show the room's members a reply they believe is end-to-end encrypted.
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN], encrypted=True)
        plain = hs.create_room([ANN])
        async with running(tmp_path, hs) as h:
            hs.push_text(room, ANN, "a secret, sent in clear")
            await hs.wait_sent(1)
            hs.push_text(room, ANN, "and again")
            hs.push_text(plain, ANN, "sentinel")  # the sync reaches it after the two above
            await h.wait_results(1)
            assert hs.texts(room) == [ENCRYPTED_NOTICE]
            assert [e.content for e in h.inputs()] == ["sentinel"] and hs.texts(plain) == ["ok"]


async def test_a_password_login_keeps_its_device_for_the_next_start(tmp_path: Path) -> None:
    config = temp_config(tmp_path)
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        async with running(tmp_path, hs, default="one", config=config, password=hs.state.password) as h:
            hs.push_text(room, ANN, "hi")
            await h.wait_results(1)
        kept = json.loads((tmp_path / "data" / "matrix" / "%40hubbot%3Aexample.org.json").read_text())
        assert kept["device_id"] and kept["access_token"] in hs.state.tokens
        assert (tmp_path / "data" / "matrix" / "%40hubbot%3Aexample.org.json").stat().st_mode & 0o077 == 0
        async with running(tmp_path, hs, default="two", config=config, password=hs.state.password) as h:
            hs.push_text(room, ANN, "again")
            await h.wait_results(1)
        assert len(hs.calls("login")) == 1, "the kept device is used, not a new login"
        assert hs.texts(room) == ["one", "two"]


async def test_a_wrong_password_is_one_clear_error(tmp_path: Path) -> None:
    async with FakeMatrix() as hs:
        ext = extension(MatrixSettings(homeserver=hs.base_url, user_id=BOT, password="wrong"))
        hub = Hub(temp_config(tmp_path), model=ScriptedModel([]), load_extensions=False, extensions=[ext])
        with pytest.raises(ExtensionError, match="refused the password login"):
            async with hub:
                pass


async def test_a_command_is_answered_without_the_model(tmp_path: Path) -> None:
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        async with running(tmp_path, hs, []) as h:
            hs.push_text(room, ANN, "/help")
            await hs.wait_sent(1)
            assert "/new" in hs.texts(room)[0]
            assert h.model.requests == []


async def test_malformed_events_are_passed_over_and_never_wedge_the_sync(tmp_path: Path) -> None:
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        async with running(tmp_path, hs, default="fine") as h:
            for event in (
                {"type": "m.room.message", "sender": ANN, "content": "not an object"},
                {"type": "m.room.message", "sender": ANN, "content": {"msgtype": "m.text", "body": 5}},
                {"type": "m.room.message", "content": {"msgtype": "m.text", "body": "no sender"}},
                {"type": "m.room.message", "sender": ANN, "content": {"msgtype": "m.image", "body": "x.png"}},
                {
                    "type": "m.room.message",
                    "sender": ANN,
                    "content": {"msgtype": "m.text", "body": "x", "m.relates_to": 7},
                },
                {"type": "m.room.message", "sender": ANN, "content": {"msgtype": "m.location", "body": "geo:1,2"}},
                {"type": "m.room.message", "sender": ANN, "content": {"msgtype": "m.text", "body": "   "}},
            ):
                hs.push_event(room, event)
            hs.push_text(room, ANN, "a real question")
            inputs = await h.wait_inputs(2)
            assert [e.content for e in inputs] == ["x", "a real question"]  # the odd relation is no reply
            await h.synced()
            assert await h.hub.memory.get(TOKEN_KEY + BOT) == f"s{hs.state.position}"
        assert hs.texts(room) in (["fine"], ["fine", "fine"])  # one run or two


@pytest.fixture
def quick_resync(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sync loop waits 50 ms, not seconds, before it syncs a failed batch again."""
    import hub_matrix._sync as sync

    monkeypatch.setattr(sync, "Backoff", lambda **kw: Backoff(first=0.05, most=0.2, jitter=0.0))


def poison_on(monkeypatch: pytest.MonkeyPatch, body: str) -> list[str]:
    """Reading an event whose body is ``body`` fails (a bug, or a shape the intake does not
    expect): its event id, once per attempt."""
    import hub_matrix._intake as intake

    real, attempts = intake.classify, []

    def classify(room_id: str, event: Any, **kw: Any) -> Any:
        if isinstance(event, dict) and event.get("content", {}).get("body") == body:
            attempts.append(event["event_id"])
            raise AttributeError("'NoneType' object has no attribute 'get' (injected)")
        return real(room_id, event, **kw)

    monkeypatch.setattr(intake, "classify", classify)
    return attempts


@pytest.mark.usefixtures("quick_resync")
async def test_a_poison_event_is_synced_again_then_parked_and_the_sync_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts = poison_on(monkeypatch, "poison")
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        async with running(tmp_path, hs, default="fine") as h:
            kept = await h.hub.memory.get(TOKEN_KEY + BOT)
            poison = hs.push_text(room, ANN, "poison")
            hs.push_text(room, ANN, "after it")
            await hs.wait_sent(1, timeout=10)
            # the token stayed before the poison event until it was parked: synced again each time
            assert attempts == [poison["event_id"]] * PARK_AFTER
            assert hs.state.syncs.count(kept) >= PARK_AFTER
            (parked,) = await h.hub.inbox.parked()
            assert parked.context == f"matrix:room:{room}" and parked.entry.content == "poison"
            assert parked.entry.platform_id == f"matrix:{poison['event_id']}"
            assert parked.entry.meta["event_id"] == poison["event_id"] and parked.entry.meta["sender"] == ANN
            assert parked.failures == PARK_AFTER and "AttributeError" in parked.error
            hs.push_text(room, ANN, "later")
            await hs.wait_sent(2, timeout=10)
            await h.synced()
            assert await h.hub.memory.get(TOKEN_KEY + BOT) == f"s{hs.state.position}"
            assert [e.content for e in await h.wait_inputs(2)] == ["after it", "later"]
            assert len(attempts) == PARK_AFTER and len(await h.hub.inbox.parked()) == 1
        assert hs.texts(room) == ["fine", "fine"]  # each answered once, the poison never


@pytest.mark.usefixtures("quick_resync")
async def test_a_parked_event_put_back_with_hub_inbox_retry_is_answered_in_its_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = temp_config(tmp_path)
    attempts = poison_on(monkeypatch, "poison")
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        token = hs.token()
        async with running(tmp_path, hs, default="not yet", config=config, access_token=token) as h:
            poison = hs.push_text(room, ANN, "poison")
            await hs.wait_for(lambda: len(attempts) == PARK_AFTER, timeout=10)
            await h.synced()
            (parked,) = await h.hub.inbox.parked()
            assert await h.hub.inbox.retry(parked.entry.id)  # what `hub inbox retry ID` does
        assert hs.texts(room) == []
        async with running(tmp_path, hs, default="answered at last", config=config, access_token=token) as h:
            (sent,) = await hs.wait_sent(1, timeout=10)
            assert [e.content for e in await h.wait_inputs(1)] == ["poison"]
            relates = sent["content"]["m.relates_to"]
            assert sent["room_id"] == room and relates["m.in_reply_to"]["event_id"] == poison["event_id"]
            assert await h.hub.inbox.parked() == []
        assert hs.texts(room) == ["answered at last"] and len(attempts) == PARK_AFTER


class FailingInbox(InMemoryInbox):
    """An inbox whose next ``failures`` records fail, as a store outage does."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.failed_at: list[str | None] = []  # the platform id of each record that failed

    async def record(self, context: str, entry: InputLog) -> bool:
        if self.failures:
            self.failures -= 1
            self.failed_at.append(entry.platform_id)
            raise StoreError("the inbox is down (injected)", store="inbox", operation="write")
        return await super().record(context, entry)


@pytest.mark.usefixtures("quick_resync")
async def test_a_store_outage_is_never_counted_against_an_event_and_parks_nothing(tmp_path: Path) -> None:
    inbox = FailingInbox(PARK_AFTER + 1)  # more failures than would park a poison event
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        async with running(tmp_path, hs, default="fine", inbox=inbox) as h:
            kept = await h.hub.memory.get(TOKEN_KEY + BOT)
            event = hs.push_text(room, ANN, "keep me")
            await hs.wait_sent(1, timeout=10)
            assert inbox.failed_at == [f"matrix:{event['event_id']}"] * (PARK_AFTER + 1)
            assert hs.state.syncs.count(kept) >= PARK_AFTER + 2  # the token stayed before it
            assert await h.hub.inbox.parked() == []
            assert [e.content for e in await h.wait_inputs(1)] == ["keep me"]
            await h.synced()
            assert await h.hub.memory.get(TOKEN_KEY + BOT) == f"s{hs.state.position}"
        assert hs.texts(room) == ["fine"]


async def test_a_homeserver_that_is_down_at_start_is_waited_for(tmp_path: Path) -> None:
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        hs.fail_next("whoami", status=502, count=1)
        hs.fail_next("whoami", status=429, retry_after=0.1, count=1)
        async with running(tmp_path, hs, default="up again") as h:
            hs.push_text(room, ANN, "are you there?")
            await h.wait_results(1)
        assert [r.status for r in hs.calls("whoami")][:3] == [502, 429, 200]
        assert hs.texts(room) == ["up again"]

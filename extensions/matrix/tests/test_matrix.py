"""The Matrix extension, with the real matrix-nio client against a loopback fake homeserver.

No mocks: each test runs a Hub with the extension's own sync loop and sender against
``fake_matrix.FakeMatrix`` and a scripted model (or, for the SIGKILL test, a real
``hub run`` subprocess and the fake OpenAI server).
"""

from __future__ import annotations

from pathlib import Path

from fake_matrix import BOT, FakeMatrix
from matrix_harness import ANN, reply, running

from hub_matrix import TOKEN_KEY


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

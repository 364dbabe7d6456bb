"""``live = true`` on Matrix: one message edited in place (``m.replace``) while a slow model
writes, with the real matrix-nio client against the loopback fake homeserver."""

from __future__ import annotations

from pathlib import Path

from matrix_harness import ANN, reply, running
from test_matrix import body_of

from hub.testing.matrix import FakeMatrix
from hub_matrix import MAX_LENGTH, wire_len


def slow(h, chunk: int = 40, delay: float = 0.01) -> None:
    """The hub's model streams in chunks of ``chunk`` characters, ``delay`` seconds apart."""
    h.model.chunk = chunk
    h.model.chunk_delay = delay


async def test_a_slow_reply_grows_by_edits_and_ends_equal_to_the_output(tmp_path: Path) -> None:
    body = "**Answer**\n\n" + body_of(3000)
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        async with running(tmp_path, hs, [reply(body)], live=True, live_interval=0.1) as h:
            slow(h)
            asked = hs.push_text(room, ANN, "tell me")
            (result,) = await h.wait_results(1, timeout=30)
            (entry,) = result.outputs
            assert entry.sent and entry.live and entry.content == body
            (first, *edits) = [s for s in hs.sent if s["type"] == "m.room.message"]
            assert len(edits) >= 3, "it grows by edits"
            assert first["content"]["m.relates_to"] == {"m.in_reply_to": {"event_id": asked["event_id"]}}
            for e in edits:
                c = e["content"]
                assert c["m.relates_to"] == {"rel_type": "m.replace", "event_id": first["event_id"]}
                assert c["body"] == "* " + c["m.new_content"]["body"]
            shown = [first["content"]["body"]] + [e["content"]["m.new_content"]["body"] for e in edits]
            assert all(body.startswith(s) for s in shown), "it only grows"
            assert hs.shown(first["event_id"]) == body, "and ends equal to the complete output"
            final = edits[-1]["content"]["m.new_content"]
            assert final["format"] == "org.matrix.custom.html"
            assert final["formatted_body"].startswith("<p><strong>Answer</strong></p>\n<p>Paragraph 0: ")
            assert entry.data["event_ids"] == [first["event_id"]]


async def test_a_live_reply_over_the_limit_continues_in_new_messages_in_order(tmp_path: Path) -> None:
    body = body_of(40_000)
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        async with running(tmp_path, hs, [reply(body)], live=True, live_interval=0.1) as h:
            slow(h, chunk=2000, delay=0.005)
            hs.push_text(room, ANN, "tell me everything")
            (result,) = await h.wait_results(1, timeout=60)
            (entry,) = result.outputs
            assert entry.sent, entry.error
            ids = entry.data["event_ids"]
            assert len(ids) >= 3
            shown = [hs.shown(i) for i in ids]
            assert all(wire_len(s) <= MAX_LENGTH for s in shown)
            assert "".join(shown).replace("\n", "") == body.replace("\n", ""), "nothing lost, in order"

"""Approvals on Matrix, through the real client against the fake homeserver: the question is a
message; a reaction to it (👍 / 👎) or a reply saying yes or no answers it, once, from the
person who asked only; neither reaches the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matrix_harness import ANN, BOB, reply, running
from pydantic import BaseModel

from hub import Extension, action
from hub.testing.matrix import FakeMatrix

ran: list[str] = []


class PathArgs(BaseModel):
    path: str


@action(name="delete", description="Delete a file.", confirm=True)
async def delete(args: PathArgs, ctx: Any) -> dict[str, Any]:
    ran.append(args.path)
    return {"deleted": args.path}


CALL = '<response><action_call name="delete">{"path": "/tmp/x"}</action_call></response>'
TOOLS = Extension("t", actions=[delete])


def react(hs: FakeMatrix, room: str, sender: str, target: str, key: str) -> None:
    hs.push_event(
        room,
        {
            "type": "m.reaction",
            "sender": sender,
            "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": target, "key": key}},
        },
    )


async def test_a_reaction_from_the_asker_approves_once_and_another_persons_is_refused(tmp_path: Path) -> None:
    ran.clear()
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN, BOB])
        async with running(tmp_path, hs, [CALL, reply("deleted it")], extensions=[TOOLS]) as h:
            h.hub.approvals.poll = 0.01
            hs.push_text(room, ANN, "delete /tmp/x please", mention=True)
            await hs.wait_for(lambda: any("Approve delete" in t for t in hs.texts(room)), 10)
            question = next(s for s in hs.sent if "Approve delete" in s["content"]["body"])
            assert "React 👍 to approve" in question["content"]["body"]
            react(hs, room, BOB, question["event_id"], "👍")
            await hs.wait_for(lambda: any("only the person who asked" in t for t in hs.texts(room)), 10)
            assert ran == []
            react(hs, room, ANN, question["event_id"], "👍")
            await hs.wait_for(lambda: "deleted it" in hs.texts(room), 10)
            react(hs, room, ANN, question["event_id"], "👎")  # again: already answered
            await hs.wait_for(lambda: any(t.startswith("already answered") for t in hs.texts(room)), 10)
            (result,) = await h.wait_results(1)
            assert "delete: approved" in hs.texts(room)
            assert len(h.inputs()) == 1 and len(h.model.requests) == 2  # reactions never reached the model
    assert ran == ["/tmp/x"] and result.ok


async def test_a_reply_saying_no_denies(tmp_path: Path) -> None:
    ran.clear()
    async with FakeMatrix() as hs:
        room = hs.create_room([ANN])
        async with running(tmp_path, hs, [CALL, reply("fine, I will not")], extensions=[TOOLS]) as h:
            h.hub.approvals.poll = 0.01
            hs.push_text(room, ANN, "delete /tmp/x please")
            await hs.wait_for(lambda: any("Approve delete" in t for t in hs.texts(room)), 10)
            question = next(s for s in hs.sent if "Approve delete" in s["content"]["body"])
            hs.push_text(room, ANN, "no", **{"m.relates_to": {"m.in_reply_to": {"event_id": question["event_id"]}}})
            (result,) = await h.wait_results(1)
            assert "delete: denied" in hs.texts(room) and len(h.inputs()) == 1
    assert ran == [] and [e.denied for e in result.logs if e.kind == "action_result"] == [True]

"""Approvals on Discord, through the real discord.py client against the fake: the question
comes with two buttons, a press is a MESSAGE_COMPONENT interaction answered once, by the
person who asked only, and acknowledged privately (ephemeral)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from test_discord import running

from hub import Extension, action
from hub.testing.discord import FakeDiscord

ran: list[str] = []


class PathArgs(BaseModel):
    path: str


@action(name="delete", description="Delete a file.", confirm=True)
async def delete(args: PathArgs, ctx: Any) -> dict[str, Any]:
    ran.append(args.path)
    return {"deleted": args.path}


TOOLS = Extension("tools", actions=[delete])
CALL = '<response><action_call name="delete">{"path": "/tmp/x"}</action_call></response>'
DONE = '<response><output type="discord:message">deleted it</output></response>'


def buttons(sent: dict[str, Any]) -> list[dict[str, Any]]:
    rows = sent["payload"].get("components") or []
    return [c for row in rows for c in row.get("components", [])]


def ephemeral_answer(dc: FakeDiscord, iid: int) -> str:
    (callback,) = dc.state.interactions[iid].callbacks
    assert callback["type"] == 4 and callback["data"]["flags"] & 64  # seen by the presser only
    return str(callback["data"]["content"])


async def test_a_press_of_approve_runs_the_action_once_and_only_the_asker_may_press(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran.clear()
    async with running(tmp_path, monkeypatch, [CALL, DONE], extensions=[TOOLS]) as r:
        dc, hub = r.dc, r.hub
        hub.approvals.poll = 0.01
        dc.push_message(dc.dm_channel_id, "delete /tmp/x please")
        await dc.wait_for(lambda: any(buttons(s) for s in dc.sent), 10)
        question = next(s for s in dc.sent if buttons(s))
        assert 'Approve delete {"path": "/tmp/x"}' in question["content"]
        yes, no = buttons(question)
        assert (yes["label"], no["label"]) == ("Approve", "Deny") and yes["custom_id"].startswith("hub:approval:yes:")

        bob = dc.add_user(dc._snowflake(), "bob")
        stranger = dc.push_press(question["id"], yes["custom_id"], user_id=bob)
        await dc.wait_for(lambda: bool(dc.state.interactions[stranger].callbacks), 10)
        assert "only the person who asked" in ephemeral_answer(dc, stranger) and ran == []

        first = dc.push_press(question["id"], yes["custom_id"])
        await dc.wait_for(lambda: bool(dc.state.interactions[first].callbacks), 10)
        second = dc.push_press(question["id"], no["custom_id"])
        await dc.wait_for(lambda: bool(dc.state.interactions[second].callbacks), 10)
        assert ephemeral_answer(dc, first) == "approved: delete"
        assert ephemeral_answer(dc, second).startswith("already answered: approved")
        await dc.wait_for(lambda: any(s["content"] == "deleted it" for s in dc.sent), 10)
        await dc.wait_for(lambda: dc.state.messages[question["id"]]["components"] == [], 10)
        assert dc.state.messages[question["id"]]["content"].endswith("— approved")
    assert ran == ["/tmp/x"] and len(r.model.requests) == 2

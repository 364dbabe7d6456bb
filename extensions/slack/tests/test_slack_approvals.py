"""Approvals on Slack, through the real slack-bolt app (Socket Mode) against the fake: the
question comes with Block Kit buttons, a press is a block_actions interaction answered once,
by the person who asked only, and acknowledged to the presser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel
from test_slack import running

from hub import Extension, action
from hub.testing.slack import FakeSlack

ran: list[str] = []


class PathArgs(BaseModel):
    path: str


@action(name="delete", description="Delete a file.", confirm=True)
async def delete(args: PathArgs, ctx: Any) -> dict[str, Any]:
    ran.append(args.path)
    return {"deleted": args.path}


CALL = '<response><action_call name="delete">{"path": "/tmp/x"}</action_call></response>'
DONE = '<response><output type="slack:message">deleted it</output></response>'


async def test_a_press_of_approve_runs_the_action_once_and_only_the_asker_may_press(tmp_path: Path) -> None:
    ran.clear()
    async with (
        FakeSlack() as sl,
        running(tmp_path, [CALL, DONE], sl=sl, extensions=[Extension("t", actions=[delete])]) as r,
    ):
        r.hub.approvals.poll = 0.01
        sl.push_message(sl.state.dm, "delete /tmp/x please")
        await sl.wait_for(lambda: any(m.get("blocks") for m in sl.state.sent), timeout=10)
        question = next(m for m in sl.state.sent if m.get("blocks"))
        assert 'Approve delete {"path": "/tmp/x"}' in question["text"]
        (buttons,) = [b["elements"] for b in question["blocks"] if b["type"] == "actions"]
        assert [b["text"]["text"] for b in buttons] == ["Approve", "Deny"]

        stranger = sl.push_press(question["channel"], question["ts"], "hub_approval_yes", user="UOTHER99")
        await sl.wait_for(lambda: any(x["trigger"] == stranger for x in sl.state.responses), timeout=10)
        first = sl.push_press(question["channel"], question["ts"], "hub_approval_yes")
        await sl.wait_for(lambda: any(x["trigger"] == first for x in sl.state.responses), timeout=10)
        second = sl.push_press(question["channel"], question["ts"], "hub_approval_no")
        await sl.wait_for(lambda: any(x["trigger"] == second for x in sl.state.responses), timeout=10)
        said = {x["trigger"]: x for x in sl.state.responses}
        assert "only the person who asked" in said[stranger]["text"]
        assert said[first]["text"] == "approved: delete" and said[first]["response_type"] == "ephemeral"
        assert said[second]["text"].startswith("already answered: approved")
        await sl.wait_for(lambda: any(m["text"] == "deleted it" for m in sl.state.sent), timeout=10)
        await sl.wait_for(
            lambda: (
                not any(
                    b["type"] == "actions" for b in sl.state.messages[(question["channel"], question["ts"])]["blocks"]
                )
            ),
            timeout=10,
        )
    assert ran == ["/tmp/x"]

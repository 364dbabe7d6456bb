"""The dashboard shows a run waiting for approval, and the operator answers it there, once."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from hub import Extension, RunState, action
from tests.ui.conftest import HeldModel, client, dashboard, login, wait_until

ran: list[str] = []


class PathArgs(BaseModel):
    path: str


@action(name="delete", description="Delete a file.", confirm=True)
async def delete(args: PathArgs, ctx: Any) -> dict[str, Any]:
    ran.append(args.path)
    return {"deleted": args.path}


def script(request: Any) -> str:
    """Call the action, then answer once its result is in the prompt."""
    if "<action_result" in str(request.messages):
        return '<response><output type="telegram:send">done</output></response>'
    return '<response><action_call name="delete">{"path": "/tmp/x"}</action_call></response>'


async def test_the_run_page_shows_the_question_and_its_buttons_answer_once(tmp_path: Path) -> None:
    ran.clear()
    async with dashboard(tmp_path, model=HeldModel(script), extensions=[Extension("t", actions=[delete])]) as d:
        d.hub.approvals.poll = 0.01
        async with client() as s:
            d.tg.push_message(chat_id=42, text="delete /tmp/x")
            await wait_until(d.hub.approvals.waiting)
            (question,) = await d.hub.approvals.waiting()
            csrf = await login(s, d.base)
            async with s.get(f"{d.base}/ui/runs/{question.run_id}") as resp:
                page = html.unescape(await resp.text())
            assert "waiting for approval" in page and 'delete</strong> <code>{"path": "/tmp/x"}' in page
            assert f'action="/ui/approvals/{question.id}"' in page
            async with s.post(
                f"{d.base}/ui/approvals/{question.id}", data={"approve": "1"}, allow_redirects=False
            ) as resp:
                assert resp.status == 403  # without the CSRF token: refused
            async with s.post(f"{d.base}/ui/approvals/{question.id}", data={"csrf": csrf, "approve": "1"}) as resp:
                assert "approved: delete" in html.unescape(await resp.text())
            async with s.post(f"{d.base}/ui/approvals/{question.id}", data={"csrf": csrf, "approve": "0"}) as resp:
                assert "not answered: already answered: approved" in html.unescape(await resp.text())
            await wait_until(lambda: _ended(d, question.run_id))
    assert ran == ["/tmp/x"]


async def _ended(d: Any, run_id: str) -> bool:
    run = await d.hub.runs.get(run_id)
    return run is not None and run.state != RunState.RUNNING

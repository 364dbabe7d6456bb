"""Approvals on Telegram, through the real python-telegram-bot client against the fake: the
question comes with an inline keyboard, a press is a callback_query answered once, by the
person who asked only, and acknowledged with answerCallbackQuery."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from test_telegram import reply, running

from hub import Extension, action
from hub.store import ApprovalState
from hub.testing import temp_config
from hub.testing.telegram import FakeTelegram

pytestmark = [pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")]

ran: list[str] = []


class PathArgs(BaseModel):
    path: str


@action(name="delete", description="Delete a file.", confirm=True)
async def delete(args: PathArgs, ctx: Any) -> dict[str, Any]:
    ran.append(args.path)
    return {"deleted": args.path}


TOOLS = Extension("tools", actions=[delete])
CALL = '<response><action_call name="delete">{"path": "/tmp/x"}</action_call></response>'


def keyboard_of(sent: dict[str, Any]) -> list[dict[str, Any]]:
    markup = sent["params"].get("reply_markup") or {}
    return [button for row in markup.get("inline_keyboard", []) for button in row]


async def asked(tg: FakeTelegram) -> dict[str, Any]:
    await tg.wait_for(lambda: any(keyboard_of(s) for s in tg.sent), 10)
    return next(s for s in tg.sent if keyboard_of(s))


async def test_a_press_of_approve_runs_the_action_once_and_only_the_asker_may_press(tmp_path: Path) -> None:
    ran.clear()
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, [CALL, reply("deleted it")], extensions=[TOOLS]) as h:
            h.hub.approvals.poll = 0.01
            tg.push_message(chat_id=42, text="delete /tmp/x please")
            question = await asked(tg)
            assert question["chat_id"] == 42 and 'Approve delete {"path": "/tmp/x"}' in question["text"]
            yes, no = keyboard_of(question)
            assert (yes["text"], no["text"]) == ("Approve", "Deny")
            assert yes["callback_data"].startswith("hub:approval:yes:")
            message_id = question["message_id"]

            tg.push_callback(chat_id=42, message_id=message_id, data=yes["callback_data"], from_id=7)  # not the asker
            await tg.wait_for(lambda: len(tg.state.callback_answers) == 1, 10)
            refused = tg.state.callback_answers[0]
            assert refused["show_alert"] and "only the person who asked" in refused["text"]
            assert ran == []

            tg.push_callback(chat_id=42, message_id=message_id, data=yes["callback_data"])
            tg.push_callback(chat_id=42, message_id=message_id, data=no["callback_data"])  # pressed again
            (result,) = await h.wait_results(1)
            await tg.wait_for(lambda: len(tg.state.callback_answers) == 3, 10)
            first, second = (a["text"] for a in tg.state.callback_answers[1:])
            assert first == "approved: delete" and second.startswith("already answered: approved")
            assert ran == ["/tmp/x"] and result.ok
            assert [s["text"] for s in tg.sent if s["method"] == "sendMessage"][-1] == "deleted it"
            edit = next(s for s in tg.sent if s["method"] == "editMessageText" and s["message_id"] == message_id)
            assert edit["text"].endswith("— approved") and "reply_markup" not in tg.state.messages[(42, message_id)]
            assert len(h.inputs()) == 1  # the presses never reached the inbox or the model
            assert len(h.model.requests) == 2


async def test_a_press_after_the_timeout_is_too_late(tmp_path: Path) -> None:
    ran.clear()
    config = temp_config(tmp_path)
    config.approvals.timeout = 30
    async with FakeTelegram() as tg:
        async with running(tmp_path, tg, [CALL, reply("ok, I will not")], extensions=[TOOLS], config=config) as h:
            h.hub.approvals.poll = 0.01
            tg.push_message(chat_id=42, text="delete /tmp/x please")
            question = await asked(tg)
            h.hub.approvals.clock = lambda: time.time() + 31
            (result,) = await h.wait_results(1)
            yes, _ = keyboard_of(question)
            tg.push_callback(chat_id=42, message_id=question["message_id"], data=yes["callback_data"])
            await tg.wait_for(lambda: len(tg.state.callback_answers) == 1, 10)
            assert tg.state.callback_answers[0]["text"] == "already answered: denied: no answer in time"
            (row,) = await h.hub.approvals.store.list()
            assert row.state == ApprovalState.EXPIRED
    assert ran == [] and [e.denied for e in result.logs if e.kind == "action_result"] == [True]

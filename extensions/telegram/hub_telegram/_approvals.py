"""Approvals on Telegram: the question is a message with an inline keyboard (Approve, Deny);
a press is a ``callback_query`` whose data names the approval, answered through
``hub.approvals`` (only the person who asked, or an operator, is accepted) and acknowledged
with ``answerCallbackQuery`` showing the outcome. Once settled the keyboard is taken away.

A press is not a message: it never reaches the inbox or the model. Pressed twice, or after
the timeout, the hub's compare-and-set leaves one outcome and the presser is told.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import TelegramError

from hub.platform import ApprovalRequest, Approver, SendFailed

from ._client import TelegramClient, map_error

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["CALLBACK_PREFIX", "TelegramApprover", "answer_press", "is_press"]

log = logging.getLogger("hub_telegram")

CALLBACK_PREFIX = "hub:approval:"
"""``callback_data`` of the buttons: ``hub:approval:yes:ID`` or ``hub:approval:no:ID`` (under 64 bytes)."""


class TelegramApprover(Approver):
    """Asks in the chat with two inline buttons; remembers each question's message to settle it."""

    def __init__(self, client_for: Callable[[str], TelegramClient]) -> None:
        self.client_for = client_for  # the bot of a conversation's account asks in it
        self._shown: dict[str, tuple[TelegramClient, int, int, str]] = {}  # id -> bot, chat, message, text

    async def ask(self, request: ApprovalRequest, ctx: Any) -> None:
        chat_id = int(ctx.args.chat_id)
        client = self.client_for(getattr(ctx.args, "account", ""))
        keyboard = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton("Approve", callback_data=f"{CALLBACK_PREFIX}yes:{request.id}"),
                    InlineKeyboardButton("Deny", callback_data=f"{CALLBACK_PREFIX}no:{request.id}"),
                ]
            ]
        )
        text = request.text[:4000]

        async def attempt() -> Any:
            try:
                return await client.bot.send_message(chat_id=chat_id, text=text, reply_markup=keyboard)
            except TelegramError as e:
                raise map_error(e) from e

        message = await client.governor.send(chat_id, attempt)
        self._shown[request.id] = (client, chat_id, message.message_id, text)

    async def settled(self, request: ApprovalRequest, message: str, ctx: Any) -> None:
        shown = self._shown.pop(request.id, None)
        if shown is None:  # asked before a restart: its buttons answer "already answered"
            return
        client, chat_id, message_id, text = shown
        try:  # an edit without reply_markup takes the keyboard away
            await client.edit_text(chat_id, message_id, f"{text}\n— {message}", markup=False)
        except SendFailed as e:
            log.info("telegram: approval %s: the question's buttons stay: %s", request.id, e)


def is_press(query: CallbackQuery | None) -> bool:
    return query is not None and isinstance(query.data, str) and query.data.startswith(CALLBACK_PREFIX)


async def answer_press(query: CallbackQuery, hub: Hub) -> None:
    """One press of an approval button: answered through the hub, acknowledged to the presser."""
    assert query.data is not None
    verdict, _, approval_id = query.data.removeprefix(CALLBACK_PREFIX).partition(":")
    answer = await hub.approvals.answer(
        approval_id, approve=verdict == "yes", user=str(query.from_user.id), platform="telegram"
    )
    try:
        await query.answer(text=answer.message[:200], show_alert=not answer.accepted)
    except TelegramError as e:  # the press is answered in the hub either way
        log.info("telegram: answering the press of approval %s failed: %s", approval_id, e)

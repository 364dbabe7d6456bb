"""Approvals on Slack: the question is a message with Block Kit buttons (Approve, Deny) in
the thread asked in; a press is a ``block_actions`` interaction whose button value is the
approval's id, answered through ``hub.approvals`` (only the person who asked, or an
operator, is accepted) and acknowledged to the presser only (an ephemeral response). Once
settled the buttons are taken away. A press never reaches the inbox or the model.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hub.platform import ApprovalRequest, Approver, SendFailed

from ._client import SlackClient, mapped
from ._mrkdwn import to_mrkdwn, to_plain

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["ACTION_ID", "SlackApprover", "answer_press"]

log = logging.getLogger("hub_slack")

ACTION_ID = re.compile(r"^hub_approval_(yes|no)$")
"""The ``action_id`` of the two buttons; their ``value`` is the approval's id."""


def _blocks(text: str, approval_id: str | None) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": to_mrkdwn(text) or " "}}]
    if approval_id is not None:
        blocks.append(
            {
                "type": "actions",
                "block_id": f"hub_approval:{approval_id}",
                "elements": [
                    {
                        "type": "button",
                        "action_id": f"hub_approval_{verdict}",
                        "text": {"type": "plain_text", "text": label},
                        "style": style,
                        "value": approval_id,
                    }
                    for verdict, label, style in (("yes", "Approve", "primary"), ("no", "Deny", "danger"))
                ],
            }
        )
    return blocks


class SlackApprover(Approver):
    """Asks in the conversation's thread with two buttons; remembers each question to settle it."""

    def __init__(self, pick: Callable[[Any], tuple[SlackClient, tuple[str, str | None]]]) -> None:
        # ctx -> the client of the conversation's account, and (channel, thread_ts): where its
        # replies go
        self._pick = pick
        self._shown: dict[str, tuple[SlackClient, str, str, str]] = {}  # id -> client, channel, ts, text

    async def ask(self, request: ApprovalRequest, ctx: Any) -> None:
        client, (channel, thread) = self._pick(ctx)
        text = request.text[:2900]

        async def once() -> str:
            resp = await mapped(
                client.web.chat_postMessage(
                    channel=channel, text=to_plain(text), blocks=_blocks(text, request.id), thread_ts=thread
                )
            )
            return str(resp["ts"])

        ts = await client.governor.send(channel, once)
        self._shown[request.id] = (client, channel, ts, text)

    async def settled(self, request: ApprovalRequest, message: str, ctx: Any) -> None:
        shown = self._shown.pop(request.id, None)
        if shown is None:  # asked before a restart: its buttons answer "already answered"
            return
        client, channel, ts, text = shown
        done = f"{text}\n— {message}"
        try:
            await client.governor.send(
                channel,
                lambda: mapped(
                    client.web.chat_update(channel=channel, ts=ts, text=to_plain(done), blocks=_blocks(done, None))
                ),
            )
        except SendFailed as e:
            log.info("slack: approval %s: the question's buttons stay: %s", request.id, e)


async def answer_press(body: dict[str, Any], hub: Hub) -> str:
    """One press of an approval button (a ``block_actions`` payload): answered through the hub;
    what the presser is told."""
    action = (body.get("actions") or [{}])[0]
    verdict = ACTION_ID.match(str(action.get("action_id", "")))
    user = (body.get("user") or {}).get("id")
    answer = await hub.approvals.answer(
        str(action.get("value", "")),
        approve=verdict is not None and verdict.group(1) == "yes",
        user=str(user) if user else None,
        platform="slack",
    )
    return answer.message

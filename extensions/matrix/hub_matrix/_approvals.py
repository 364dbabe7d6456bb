"""Approvals on Matrix: the question is a message in the room; the person answers with a
reaction to it (👍 or ✅ approve, 👎 or ❌ deny) or a reply to it saying yes or no. Which
question an event answers is kept in the hub's memory (``matrix:approval:EVENT_ID``), so a
reaction after a restart still finds it. The answer goes through ``hub.approvals`` (only the
person who asked, or an operator, is accepted); an answer that was not taken is told in the
room. Such a reaction or reply never reaches the inbox or the model.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from hub.platform import ApprovalRequest, Approver, SendFailed

from ._client import MatrixClient
from ._events import strip_reply_fallback

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["MatrixApprover", "answer_event", "KEY_PREFIX"]

log = logging.getLogger("hub_matrix")

KEY_PREFIX = "matrix:approval:"
_REACTIONS = {"👍": True, "👍️": True, "✅": True, "👎": False, "👎️": False, "❌": False}
_WORDS = {"y": True, "yes": True, "approve": True, "n": False, "no": False, "deny": False}


class MatrixApprover(Approver):
    """Asks with a message; remembers which event asks which question."""

    def __init__(self, client: MatrixClient) -> None:
        self.client = client
        # held from the send of a question until its event is remembered: an answer that
        # syncs in between waits for it instead of passing for an ordinary message
        self.asking = asyncio.Lock()

    async def ask(self, request: ApprovalRequest, ctx: Any) -> None:
        room_id = ctx.context.args.room_id
        text = f"{request.text}\nReact 👍 to approve or 👎 to deny (or reply yes or no)."
        async with self.asking:
            (event_id, *_) = await self.client.send_text(room_id, text)
            await ctx.hub.memory.set(KEY_PREFIX + event_id, request.id)

    async def settled(self, request: ApprovalRequest, message: str, ctx: Any) -> None:
        try:
            await self.client.send_text(ctx.context.args.room_id, f"{request.action}: {message}")
        except SendFailed as e:
            log.info("matrix: approval %s: its outcome was not said in the room: %s", request.id, e)


def _verdict(event: dict[str, Any]) -> tuple[str, bool] | None:
    """The question event this one answers and how (a reaction or a yes/no reply), or None."""
    etype, content = event.get("type"), event.get("content")
    if not isinstance(content, dict):
        return None
    relates = content.get("m.relates_to")
    if not isinstance(relates, dict):
        return None
    if etype == "m.reaction" and relates.get("rel_type") == "m.annotation":
        target, key = relates.get("event_id"), relates.get("key")
        if isinstance(target, str) and key in _REACTIONS:
            return target, _REACTIONS[key]
        return None
    reply = relates.get("m.in_reply_to")
    body = content.get("body")
    if etype == "m.room.message" and isinstance(reply, dict) and isinstance(body, str):
        word = strip_reply_fallback(body).strip().strip(".!").lower()
        target = reply.get("event_id")
        if isinstance(target, str) and word in _WORDS:
            return target, _WORDS[word]
    return None


async def answer_event(room_id: str, event: Any, hub: Hub, approver: MatrixApprover) -> bool:
    """Whether ``event`` answered an approval (then it is not a message for the model)."""
    client = approver.client
    if not isinstance(event, dict) or event.get("sender") == client.user_id:
        return False
    verdict = _verdict(event)
    if verdict is None:
        return False
    target, approve = verdict
    async with approver.asking:  # a question being asked now is remembered first
        approval_id = await hub.memory.get(KEY_PREFIX + target)
    if not isinstance(approval_id, str):
        return False  # a reaction or reply to something else
    answer = await hub.approvals.answer(approval_id, approve=approve, user=str(event.get("sender")), platform="matrix")
    if not answer.accepted:
        try:
            await client.send_text(room_id, answer.message)
        except SendFailed as e:
            log.info("matrix: telling %s why the answer was not taken failed: %s", event.get("sender"), e)
    return True

"""The hub's chat commands (``/help``, ``/new``, ``/stop``, and any other the hub has on) as
Slack slash commands, each acknowledged within Slack's 3-second window.

A slash command is recorded in the hub like a message (``slack:command:<trigger id>``, so a
redelivered envelope is answered once) and answered without the model. Its answer rides on
the acknowledgement itself when it comes within `ACK_WITHIN` seconds (the usual case:
commands take milliseconds); else the command is acknowledged empty and the answer is posted
to its ``response_url`` (which Slack keeps for 30 minutes). Someone the access rules leave
out is told so in the acknowledgement, to them only.

In a channel each thread is a conversation of its own, and Slack does not say which thread a
command was typed in: ``/stop`` and ``/new`` there act on the conversation of the user's own
run in progress in that channel (the newest); with none, the user is told, privately, that
they work in a thread's own context (with ``reply_in_thread = false`` the channel's own
conversation is the one, as before).

Slack does not register slash commands through the API: the app's manifest (or its
settings page) lists them, each with the request URL in Events API mode (see the docs page).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from slack_sdk.webhook.async_client import AsyncWebhookClient

from hub import CommandCall
from hub.platform import SendFailed, account_key, private_access, split_message, split_off_loop

from ._client import MAX_LENGTH, mrkdwn_len
from ._events import CHANNEL, THREAD
from ._mrkdwn import to_mrkdwn, to_plain

if TYPE_CHECKING:
    from hub import Hub, RunContext

    from ._intake import Intake

__all__ = ["SlackCommands", "ACK_WITHIN"]

log = logging.getLogger("hub_slack")

ACK_WITHIN = 2.0
"""Seconds a command's answer may take to ride on its acknowledgement (Slack waits 3)."""
RESPONSE_URL_LIFETIME = 29 * 60.0
"""Seconds a command's ``response_url`` is used for answers (Slack keeps it 30 minutes)."""
RESPONSE_HOSTS = ("hooks.slack.com",)
NOT_TAKEN = "Sorry, that did not go through. Please try again in a moment."
CONVERSATION_COMMANDS = frozenset({"stop", "new"})
"""The commands that act on one conversation: in a channel, the user's running thread's."""
IN_A_THREAD = (
    "/{name} acts on one conversation, and in this channel each thread is a conversation of its "
    "own: I found no answer of mine to you in progress here. To stop or restart a thread, use "
    "/{name} while I am answering you there, or ask in a new thread."
)


@dataclass(eq=False)
class _Pending:
    """A slash command being answered: the answer for its ack, or its response_url after."""

    trigger_id: str
    response_url: str
    received: float = field(default_factory=time.monotonic)
    answer: asyncio.Future[str] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    acked: bool = False


class SlackCommands:
    """The slash commands of one app: each taken into the hub, and its answer sent back."""

    def __init__(self, settings: Any, hub: Hub) -> None:
        self.settings = settings
        self.hub = hub
        self.intake: Intake | None = None  # set while the input is subscribed
        self._pending: dict[str, _Pending] = {}

    def names(self) -> list[str]:
        return sorted(self.hub.commands.names())

    async def invoked(self, ack: Any, command: dict[str, Any]) -> None:
        """Bolt's listener for one slash command: record it, ack it within the window."""
        name = str(command.get("command") or "").lstrip("/")
        text = str(command.get("text") or "").strip()
        intake = self.intake
        if intake is None or name not in self.hub.commands.names():
            await ack(text=f"/{name} is not available now.", response_type="ephemeral")
            return
        refusal = await self._refusal(command)
        if refusal is not None:
            log.info("slack: /%s from %s refused: %s", name, command.get("user_id"), refusal)
            await ack(text=refusal, response_type="ephemeral")
            return
        self._forget_old()
        channel = str(command.get("channel_id") or "")
        account = intake.account
        context, args = CHANNEL, {"channel_id": channel, "account": account}
        if name in CONVERSATION_COMMANDS and not channel.startswith("D"):
            try:
                thread = await self._running_conversation(
                    account_key(account, channel), str(command.get("user_id") or "")
                )
            except Exception:  # the runs could not be read (the store failed): the user is told
                log.exception("slack: /%s from %s was not taken", name, command.get("user_id"))
                await ack(text=NOT_TAKEN, response_type="ephemeral")
                return
            if thread is not None:
                context, args = THREAD, {"channel_id": channel, "thread_ts": thread, "account": account}
            elif self.settings.reply_in_thread:
                await ack(text=IN_A_THREAD.format(name=name), response_type="ephemeral")
                return
        trigger = str(command.get("trigger_id") or "")
        pending = self._pending[trigger] = _Pending(trigger, str(command.get("response_url") or ""))
        try:
            sub = await intake.send(
                context,
                args,
                f"/{name} {text}".strip(),
                user=str(command.get("user_id") or ""),
                platform_id=intake.scoped(f"slack:command:{trigger}"),
                meta={"command_id": trigger, "channel_id": channel, "team_id": command.get("team_id")},
                command=CommandCall(name, text, group=not channel.startswith("D")),  # D…: a direct message
            )
        except Exception:  # not recorded (the store failed, the hub is stopping): the user is told
            log.exception("slack: /%s from %s was not taken", name, command.get("user_id"))
            await ack(text=NOT_TAKEN, response_type="ephemeral")
            return
        answer = None
        if not sub.duplicate:
            done = asyncio.ensure_future(sub.wait())
            try:
                await asyncio.wait({pending.answer, done}, timeout=ACK_WITHIN, return_when=asyncio.FIRST_COMPLETED)
            finally:
                done.cancel()
            answer = pending.answer.result() if pending.answer.done() else None
        pending.acked = True
        if answer and mrkdwn_len(answer) <= MAX_LENGTH:
            await ack(text=to_plain(answer), blocks=[_section(answer)], response_type="in_channel")
            return
        await ack()
        if answer:  # longer than one block: in parts, on the response_url
            try:
                await self.answer(pending, answer, channel)
            except (SendFailed, OSError, TimeoutError) as e:
                log.warning("slack: the answer to /%s could not be posted: %s", name, e)

    async def _refusal(self, command: dict[str, Any]) -> str | None:
        """Why this user may not use the bot here (None: they may), as messages are filtered."""
        settings, user, channel = self.settings, str(command.get("user_id") or ""), str(command.get("channel_id"))
        if channel.startswith("D"):
            if not settings.dms:
                return "This bot does not answer direct messages."
            decision = await private_access(self.hub.access, "slack", settings, user)
            return None if decision.allowed else (decision.message or "You may not use this bot.")
        intake = self.intake
        if intake is None or not intake.channels.allows(channel) or not intake.users.allows(user):
            return "This bot does not answer here."
        return None

    async def _running_conversation(self, channel: str, user: str) -> str | None:
        """The thread of ``user``'s newest run in progress in ``channel`` (with its account, as
        conversation names hold it; any worker's)."""
        prefix = f"{THREAD}:{channel}/"
        for run in await self.hub.runs.page(limit=500, state="running", platform="slack"):
            if run.user == user and run.context.startswith(prefix):
                return run.context.removeprefix(prefix)
        return None

    def _forget_old(self) -> None:
        now = time.monotonic()
        for trigger in [t for t, p in self._pending.items() if now - p.received > RESPONSE_URL_LIFETIME]:
            del self._pending[trigger]

    # --- answers going back ---------------------------------------------------------------

    def pending_for(self, ctx: RunContext) -> _Pending | None:
        """The slash command a run's reply answers: its newest input's, while its response_url lives."""
        for entry in reversed(ctx.inputs):
            trigger = (entry.meta or {}).get("command_id")
            pending = self._pending.get(str(trigger)) if trigger else None
            if pending is not None and time.monotonic() - pending.received < RESPONSE_URL_LIFETIME:
                return pending
        return None

    async def answer(self, pending: _Pending, content: str, channel: str) -> dict[str, Any]:
        """The answer on the command's ack when it is still open, else through its response_url.

        Raises:
            SendFailed: the response_url refused it, or is not Slack's.
        """
        if not pending.acked and not pending.answer.done():
            pending.answer.set_result(content)
            return {"message_ids": [], "command": pending.trigger_id}
        url = pending.response_url
        host = (urlsplit(url).hostname or "").lower()
        if not self.settings.base_url and host not in RESPONSE_HOSTS:
            raise SendFailed("slack", channel, f"the command's response_url is not Slack's ({host or 'none'})")
        hook = AsyncWebhookClient(url, timeout=15)
        parts = await split_off_loop(lambda text: split_message(text, MAX_LENGTH, length=mrkdwn_len), content)
        for part in parts:
            resp = await hook.send(text=to_plain(part), blocks=[_section(part)], response_type="in_channel")
            if resp.status_code != 200:
                raise SendFailed("slack", channel, f"response_url answered {resp.status_code} {resp.body}")
        return {"message_ids": [], "command": pending.trigger_id, "parts": len(parts)}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": to_mrkdwn(text) or " "}}

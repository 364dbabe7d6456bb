"""Slack's events into the hub, however they arrive (a Socket Mode envelope or an Events API
POST): which to answer (:func:`classify`), who may talk to the bot (``dm_policy``,
``allowed_users``), the loop guard, then the message recorded in the hub's inbox.

An event is acknowledged to Slack only once it is recorded (or deliberately ignored): the
bolt app runs with ``process_before_response``, so its ack follows this intake's return. A
failure to record raises, nothing is acknowledged, and Slack delivers the event again; a
redelivery (a new envelope, the same message ``ts``) is refused by the inbox and is not
answered twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from hub.platform import AllowList, private_access, send_pairing_code

from ._client import SlackClient
from ._events import Ignored, Inbound, classify
from ._settings import SlackSettings

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["Intake", "thread_key"]

log = logging.getLogger("hub_slack")


def thread_key(channel: str, thread_ts: str) -> str:
    """The memory key that marks a thread the bot answers in: its replies need no mention."""
    return f"slack:thread:{channel}/{thread_ts}"


class Intake:
    """Takes each message event into the hub; one per subscribed input."""

    def __init__(
        self, client: SlackClient, settings: SlackSettings, hub: Hub, send: Callable[..., Awaitable[Any]]
    ) -> None:
        self.client = client
        self.settings = settings
        self.hub = hub
        self.send = send
        self.channels = AllowList(settings.allowed_channels)
        self.users = AllowList(settings.allowed_users)
        self.guard = settings.loop_guard()
        # Socket Mode hands envelopes over concurrently: one at a time keeps a channel's order
        self._lock = asyncio.Lock()

    async def take(self, event: dict[str, Any]) -> None:
        """Record ``event`` in the inbox, or ignore it (logged why); raises when recording fails."""
        async with self._lock:
            await self._take(event)

    async def _take(self, event: dict[str, Any]) -> None:
        me = self.client.identity
        if me is None:
            raise RuntimeError("the slack service is not started")
        known = False
        thread = event.get("thread_ts")
        if isinstance(thread, str) and thread and isinstance(event.get("channel"), str):
            known = bool(await self.hub.memory.get(thread_key(event["channel"], thread)))
        verdict = classify(
            event,
            bot_user=me.user_id,
            bot_id=me.bot_id,
            settings=self.settings,
            channels=self.channels,
            users=self.users,
            known_thread=known,
        )
        if isinstance(verdict, Ignored):
            log.debug("slack: event %s ignored: %s", event.get("ts"), verdict.reason)
            return
        if verdict.from_bot:
            # a replayed bot message must not use up one of the loop guard's turns
            if await self.hub.received(verdict.platform_id):
                return
        if self.guard is not None and not self.guard.allow(verdict.channel_id, from_bot=verdict.from_bot):
            log.info(
                "slack: %s: loop guard: not answering bot %s (%d answers to bots in %.0fs)",
                verdict.channel_id,
                verdict.user,
                self.settings.loop_guard_turns,
                self.settings.loop_guard_window,
            )
            return
        if verdict.is_dm and self.settings.dm_policy != "open" and not await self._private_allows(verdict):
            return
        if verdict.thread_ts is not None and not verdict.is_dm:
            await self.hub.memory.set(thread_key(verdict.channel_id, verdict.thread_ts), True)
        sub = await self.send(
            verdict.context,
            verdict.args,
            verdict.text,
            user=verdict.user,
            platform_id=verdict.platform_id,
            meta=verdict.meta(),
            media=list(verdict.media),
        )
        if sub.duplicate:
            # a mention comes as `message` and `app_mention` both; a redelivery comes again
            log.debug("slack: message %s was recorded before: not answered again", verdict.platform_id)

    async def _private_allows(self, verdict: Inbound) -> bool:
        """``dm_policy`` in a DM; an unknown user under ``"pairing"`` is sent the code, once, in
        the background (the events go on meanwhile)."""
        decision = await private_access(self.hub.access, "slack", self.settings, verdict.user)
        if decision.allowed:
            return True
        if decision.verdict != "pair":
            log.info(
                "slack: user %s is not on allowed_users (dm_policy = %s): DM ignored",
                verdict.user,
                self.settings.dm_policy,
            )
        elif decision.message is None:
            log.info("slack: user %s is not paired and was told their code already: DM ignored", verdict.user)
        else:
            log.info("slack: user %s is not paired: sending them a pairing code", verdict.user)
            channel = verdict.channel_id
            send_pairing_code(
                self.hub.access,
                self.hub.create_task,
                "slack",
                verdict.user,
                decision,
                lambda text: self.client.post(channel, text),  # through the governor: paced, retried
            )
        return False

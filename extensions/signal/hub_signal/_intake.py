"""A websocket frame into the hub: read (``_events``), checked (who may talk to the bot:
``allowed_users``, ``allowed_groups``, ``dm_policy`` with pairing, in groups a mention of
the bot or a reply to it, the loop guard), recorded in the hub's inbox
(``platform_id = "signal:<author>:<timestamp>"``), and only then acknowledged to the user
(the read receipt, "typing...").

A redelivery (the same author and timestamp) is refused by the inbox, so it is answered
once. A frame that fails to be taken for a reason of its own (a shape the intake does not
read, a bug) is counted; the receiver tries it again, and at its `PARK_AFTER`-th
failure it is parked in the inbox with its secrets masked (``hub inbox``) and intake goes
on. A store failure is never counted: the frame is tried until the store takes it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from hub.platform import AllowList, PoisonUpdates, SendFailed, TypingIndicator, admit_private, parse_command

from ._client import SignalClient
from ._events import CHAT, ApiNotice, Ignored, Inbound, Me, Unreadable, read_frame
from ._settings import SignalSettings

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["Intake", "PARK_AFTER"]

log = logging.getLogger("hub_signal")

PARK_AFTER = 3
"""Failures (not the store's) after which a frame is parked instead of tried again."""


class Intake:
    """Takes each frame of the receive websocket; one per subscribed input."""

    def __init__(
        self, client: SignalClient, settings: SignalSettings, hub: Hub, send: Callable[..., Awaitable[Any]], me: Me
    ) -> None:
        self.client = client
        self.settings = settings
        self.hub = hub
        self.send = send
        self.me = me
        self.users = AllowList(settings.allowed_users)
        self.groups = AllowList(settings.allowed_groups)
        self.everything = frozenset(settings.groups)
        self.bots = frozenset(settings.bots)
        self.guard = settings.loop_guard()
        self.poison = PoisonUpdates("signal", hub.inbox, park_after=PARK_AFTER, redactor=hub.redactor)
        # Signal's clients show "typing" for about 15 s: renewed every 10 while a run goes on
        self.typing = TypingIndicator("signal", client.typing, create_task=hub.create_task, interval=10.0)

    async def take_or_park(self, raw: str) -> None:
        """`take()` the frame ``raw``, or park it once it has failed `PARK_AFTER`
        times; returns when the receiver may go past it. Raises (the receiver tries it again)
        while it has failed fewer times, or whenever the store failed."""
        try:
            frame: Any = json.loads(raw)
        except ValueError:
            frame = raw
        message: Inbound | Ignored | ApiNotice | Unreadable
        try:
            message = read_frame(frame, self.me)
        except Unreadable as e:
            message = e
        key = _key(message, raw)
        try:
            if isinstance(message, Unreadable):
                raise message
            await self.take(message)
        except Exception as e:
            context, content, meta = _what_it_was(message, raw)
            if not await self.poison.failed(key, e, context=context, type=CHAT, content=content, meta=meta):
                raise
        else:
            self.poison.succeeded(key)

    async def take(self, m: Inbound | Ignored | ApiNotice) -> None:
        """Record ``m`` in the inbox, or ignore it (logged why); raises when recording fails."""
        if isinstance(m, ApiNotice):
            log.warning("signal: the REST API reported an error on the websocket: %s", m.message)
            return
        if isinstance(m, Ignored):
            log.debug("signal: a frame was not a message to answer: %s", m.reason)
            return
        if not self._addressed(m) or not await self._allows(m):
            return
        from_bot = m.author in self.bots or (m.number is not None and m.number in self.bots)
        if from_bot and await self.hub.received(m.platform_id):
            return  # a redelivered bot message must not use up one of the loop guard's turns
        if self.guard is not None and not self.guard.allow(m.chat, from_bot=from_bot):
            log.info(
                "signal: %s: loop guard: not answering bot %s (%d answers to bots in %.0fs)",
                m.chat,
                m.author,
                self.settings.loop_guard_turns,
                self.settings.loop_guard_window,
            )
            return
        command = parse_command(m.text, self.hub.commands.names()) if m.kind == "text" else None
        sub = await self.send(
            CHAT,
            {"chat": m.chat},
            m.text,
            user=m.number or m.author,
            platform_id=m.platform_id,
            meta=m.meta(),
            media=list(m.media),
            command=command,
        )
        if sub.duplicate:
            log.debug("signal: message %s was recorded before: not answered again", m.platform_id)
            return
        # recorded: now, and only now, the user may see that the bot has it
        if self.settings.read_receipts:
            self.hub.create_task(self._read(m), name=f"signal: read {m.platform_id}")
        if self.settings.typing and command is None:
            self.typing.watch(m.chat, sub.result)

    async def _allows(self, m: Inbound) -> bool:
        """A group: ``allowed_groups`` and ``allowed_users``; a direct chat: ``dm_policy``
        (with pairing), else ``allowed_users``."""
        aliases = (m.number, m.uuid)
        if m.group is not None:
            if not self.groups.allows(m.group):
                log.info("signal: group %s is not on allowed_groups: ignored", m.group)
                return False
            if not self.users.allows(m.author, *aliases):
                log.info("signal: group %s: user %s is not on allowed_users: ignored", m.group, m.author)
                return False
            return True
        if self.settings.dm_policy != "open":
            return await admit_private(
                self.hub.access,
                self.hub.create_task,
                "signal",
                self.settings,
                m.author,
                *aliases,
                send=lambda text: self.client.send(m.chat, text),  # paced and retried
                user_name=m.name or None,
                user_handle=m.number,
            )
        if not self.users.allows(m.author, *aliases):
            log.info("signal: user %s is not on allowed_users: ignored", m.author)
            return False
        return True

    def _addressed(self, m: Inbound) -> bool:
        """In a group, a mention of the bot, a reply (quote) to it, a reaction to its message,
        or a group in ``groups``; every message of a direct chat."""
        if m.group is None or m.mentioned or m.quoted or m.kind == "reaction" or m.group in self.everything:
            return True
        log.debug("signal: group %s: message %s neither mentions nor quotes the bot", m.group, m.platform_id)
        return False

    async def _read(self, m: Inbound) -> None:
        try:
            await self.client.read(m.number or m.author, m.timestamp)
        except SendFailed as e:
            log.info("signal: no read receipt for %s: %s", m.platform_id, e)

    async def stop(self) -> None:
        await self.typing.stop()


def _key(message: Inbound | Ignored | ApiNotice | Unreadable, raw: str) -> str:
    """The id a failing frame is known by: its inbox id when its author and timestamp can be
    read (a redelivery is then one message), else its text's hash."""
    if isinstance(message, Inbound):
        return message.platform_id
    if isinstance(message, Unreadable) and message.author and message.timestamp is not None:
        return f"signal:{message.author}:{message.timestamp}"
    return f"signal:frame:{hashlib.sha256(raw.encode()).hexdigest()[:32]}"


def _what_it_was(message: Any, raw: str) -> tuple[str, Any, dict[str, Any]]:
    """A poison frame as a parked input: its chat's conversation when it can be read, and its
    text (the frame's JSON when it has none)."""
    if isinstance(message, Inbound):
        return f"{CHAT}:{message.chat}", message.text or raw, {**message.meta(), "frame": raw}
    author = message.author if isinstance(message, Unreadable) else None
    meta: dict[str, Any] = {"frame": raw, "author": author}
    return (f"{CHAT}:{author}" if author else "signal"), raw, meta

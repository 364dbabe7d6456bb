"""The long-polling loop: record each message with the hub, then confirm it to Telegram.

PTB's ``Updater`` confirms updates as soon as it has fetched them, so a crash between
fetching and recording would lose them. This loop calls ``getUpdates`` itself and moves the
offset past an update only after ``send`` has recorded it in the hub's inbox (or decided to
ignore it); the offset is persisted in the hub's memory (``telegram:offset``) after each
batch, so a restart resumes exactly there. A redelivered message is refused by the inbox
(its platform id is known) and is not answered twice.

With several workers only the holder of the lease ``telegram:poll:<bot id>`` polls (the
extension runs :meth:`Poller.run` under it). In webhook mode nothing polls: updates come
through :meth:`Poller.receive`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from telegram import Update
from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TimedOut

from hub import HubError
from hub.platform import AllowList, Backoff, SendFailed, TypingIndicator, private_access

from ._client import TelegramClient, retry_after_seconds
from ._filter import Ignored, Inbound, classify
from ._settings import TelegramSettings

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["Poller", "OFFSET_KEY", "ALLOWED_UPDATES", "Backoff"]

log = logging.getLogger("hub_telegram")

OFFSET_KEY = "telegram:offset"
ALLOWED_UPDATES = ("message",)


class Poller:
    def __init__(
        self,
        client: TelegramClient,
        settings: TelegramSettings,
        hub: Hub,
        send: Callable[..., Awaitable[Any]],
    ) -> None:
        self.client = client
        self.settings = settings
        self.hub = hub
        self.send = send
        self.allowed = AllowList(settings.allowed_chats)
        self.users = AllowList(settings.allowed_users)
        self.guard = settings.loop_guard()
        # Telegram clears 'typing' after 5 s: renewed every 4.5 while a run for the chat goes on
        self.typing = TypingIndicator("telegram", client.typing, create_task=hub.create_task, interval=4.5)
        self.offset: int | None = None
        self._webhook_cleared = False

    async def run(self) -> None:
        """Poll until cancelled. After an error, wait a bounded, growing delay (logged)."""
        stored = await self.hub.memory.get(OFFSET_KEY)
        self.offset = int(stored) if stored is not None else None
        backoff = Backoff(first=1.0, most=60.0, jitter=0.2)  # never a tight loop, never over a minute
        try:
            while True:
                try:
                    await self._once()
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    self.hub.metrics.platform_connected("telegram", False)
                    await asyncio.sleep(self._after(e, backoff))
                else:
                    backoff.reset()
        finally:  # stopped, or the lease went to another worker
            self.hub.metrics.platform_connected("telegram", False)

    def _after(self, e: Exception, backoff: Backoff) -> float:
        """How long to wait after a failed poll; says why in the log."""
        match e:
            case RetryAfter():
                delay = retry_after_seconds(e)
                log.warning("telegram: getUpdates rate limited; retrying in %.0fs", delay)
                return delay
            case Conflict() if "webhook" in str(e).lower():
                log.warning("telegram: a webhook was set for this bot; deleting it to poll")
                self._webhook_cleared = False
                return backoff.next()
            case Conflict():
                delay = backoff.next()
                log.error(
                    "telegram: another process polls with this token (%s); retrying in %.0fs. Run one hub per bot.",
                    e,
                    delay,
                )
                return delay
            case InvalidToken() | HubError():  # a revoked token; a store or shutdown problem
                delay = backoff.next()
                log.error("telegram: %s; retrying in %.0fs", e, delay)
                return delay
            case TimedOut():
                delay = backoff.next()
                log.info("telegram: polling timed out (%s); retrying in %.1fs", e, delay)
                return delay
            case NetworkError():
                delay = backoff.next()
                log.warning("telegram: polling failed (%s); retrying in %.1fs", e, delay)
                return delay
            case _:  # a bug or an answer PTB could not read: logged with its traceback
                delay = backoff.next()
                log.error(
                    "telegram: polling failed (%s: %s); retrying in %.1fs", type(e).__name__, e, delay, exc_info=e
                )
                return delay

    async def _once(self) -> None:
        me = await self.client.ensure_ready()
        if not self._webhook_cleared:
            await self.client.bot.delete_webhook(drop_pending_updates=False)
            self._webhook_cleared = True
        self.hub.metrics.platform_connected("telegram", True)  # Telegram answers this worker
        updates = await self.client.bot.get_updates(
            offset=self.offset, timeout=self.settings.poll_timeout, allowed_updates=list(ALLOWED_UPDATES)
        )
        if not updates:
            return
        start = self.offset
        try:
            for update in updates:
                await self._handle(update, me)
                # recorded (or deliberately ignored): only now may Telegram forget it.
                # A redelivery is the inbox's to refuse (send says duplicate), not ours.
                self.offset = update.update_id + 1
        finally:
            if self.offset != start:
                await self.hub.memory.set(OFFSET_KEY, self.offset)

    async def receive(self, update: Update) -> None:
        """Handle one update that came another way (a webhook POST) exactly as a polled one;
        returns once it is recorded (or deliberately ignored)."""
        me = await self.client.ensure_ready()
        await self._handle(update, me)

    async def _handle(self, update: Update, me: Any) -> None:
        verdict = classify(update, me, self.settings, self.allowed)
        if isinstance(verdict, Ignored):
            log.debug("telegram: update %s ignored: %s", verdict.update_id, verdict.reason)
            return
        names = (verdict.username, f"@{verdict.username}" if verdict.username else None)
        if verdict.chat_type == "private" and self.settings.dm_policy != "open":
            if not await self._private_allows(verdict, names):
                return
        elif not self.users.allows(verdict.user_id, *names):
            log.info("telegram: chat %s: user %s is not on allowed_users: ignored", verdict.chat_id, verdict.user_id)
            return
        if not self._guard_allows(verdict):
            log.info(
                "telegram: chat %s: loop guard: not answering bot %s (%d answers to bots in %.0fs)",
                verdict.chat_id,
                verdict.user_id,
                self.settings.loop_guard_turns,
                self.settings.loop_guard_window,
            )
            return
        sub = await self.send(
            "telegram:chat",
            {"chat_id": verdict.chat_id},
            verdict.text,
            user=str(verdict.user_id),
            platform_id=verdict.platform_id,
            meta=verdict.meta(),
            media=list(verdict.media),
        )
        if sub.duplicate:
            log.info("telegram: message %s was recorded before: not answered again", verdict.platform_id)
            return
        if self.settings.typing:
            self.typing.watch(verdict.chat_id, sub.result)

    async def _private_allows(self, verdict: Inbound, names: tuple[str | None, ...]) -> bool:
        """``dm_policy`` in a private chat; an unknown user under ``"pairing"`` is sent the code."""
        decision = await private_access(self.hub.access, "telegram", self.settings, verdict.user_id, *names)
        if decision.allowed:
            return True
        if decision.message is None:
            log.info(
                "telegram: user %s is not on allowed_users (dm_policy = %s): ignored",
                verdict.user_id,
                self.settings.dm_policy,
            )
            return False
        log.info("telegram: user %s is not paired: sent them a pairing code", verdict.user_id)
        # through the client's governor (paced, retried); a send that fails is logged, and the
        # user gets the same code with their next message
        try:
            await self.client.send_text(verdict.chat_id, decision.message)
        except SendFailed as e:
            log.warning("telegram: the pairing code for user %s was not sent: %s", verdict.user_id, e)
        return False

    def _guard_allows(self, verdict: Inbound) -> bool:
        if self.guard is None:
            return True
        return self.guard.allow(verdict.chat_id, from_bot=verdict.is_bot)

    async def stop(self) -> None:
        await self.typing.stop()

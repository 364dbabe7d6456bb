"""Telegram's updates into the hub, however they arrive (a poll or a webhook POST): which
messages to answer (``_filter``), who may talk to the bot (``dm_policy``, ``allowed_users``),
the loop guard, whether it is one of the hub's commands (``_commands``), then the message
recorded in the hub's inbox; and the typing indicator while its run goes on. A press of an
approval's button (a ``callback_query``) is answered through ``hub.approvals`` (``_approvals``).

An update is taken only once it is recorded (or deliberately ignored): the poller moves its
offset past it, the webhook answers Telegram's POST, only then. A redelivered message is
refused by the inbox (its platform id is known) and is not answered twice. An update that
fails to be taken `PARK_AFTER` times for a reason of its own (not the store's) is
parked in the inbox (``hub inbox``), and intake goes on past it. An update that
python-telegram-bot cannot parse at all (`Intake.parse_or_park()`) is parked at once: the
same JSON fails the same way every time, and one such update would otherwise fail its
whole ``getUpdates`` batch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from telegram import Update

from hub.platform import AllowList, PoisonUpdates, TypingIndicator, account_key, admit_private

from ._approvals import answer_press, is_press
from ._client import TelegramClient
from ._commands import TelegramCommands
from ._filter import Ignored, Inbound, classify
from ._settings import TelegramSettings

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["Intake", "ALLOWED_UPDATES", "PARK_AFTER"]

log = logging.getLogger("hub_telegram")

ALLOWED_UPDATES = ("message", "callback_query")
"""The kinds of update the bot asks Telegram for, by polling or by webhook."""
PARK_AFTER = 3
"""Failures (not the store's) after which an update is parked instead of retried."""


class Intake:
    """Takes each update into the hub as `take()` decides; one per subscribed input."""

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
        self.commands = TelegramCommands(client, hub)
        # Telegram clears 'typing' after 5 s: renewed every 4.5 while a run for the chat goes on
        self.typing = TypingIndicator("telegram", client.typing, create_task=hub.create_task, interval=4.5)
        self.poison = PoisonUpdates(client.label, hub.inbox, park_after=PARK_AFTER, redactor=hub.redactor)
        self.account = client.account

    def conversation(self, chat_id: int | None) -> str:
        """The name of ``chat_id``'s conversation on this intake's account (``telegram`` for
        an update that names no chat)."""
        return f"telegram:chat:{account_key(self.account, str(chat_id))}" if chat_id is not None else "telegram"

    def scoped(self, platform_id: str) -> str:
        """``platform_id`` as the inbox knows it: two bots in one group see the same message
        ids, and each account answers its own copy."""
        return platform_id.replace("telegram:", f"telegram:{self.account}/", 1) if self.account else platform_id

    async def parse_or_park(self, raw: Any) -> Update | None:
        """``raw`` (one update's JSON, as Telegram sent it) parsed on its own; None when it
        cannot be parsed, once it is parked (the caller moves past it).

        Raises:
            StoreError: the inbox cannot park it now (it is fetched again).
        """
        try:
            if not isinstance(raw, dict):
                raise TypeError(f"an update is a JSON object, not {type(raw).__name__}")
            return Update.de_json(raw, self.client.bot)
        except Exception as e:
            update_id = raw.get("update_id") if isinstance(raw, dict) else None
            text = json.dumps(raw, default=repr, sort_keys=True)
            chat_id = _chat_id_of(raw)
            key = self.scoped(
                f"telegram:update:{update_id}"
                if isinstance(update_id, int)
                else f"telegram:update:{hashlib.sha256(text.encode()).hexdigest()[:32]}"
            )
            parked = await self.poison.failed(
                key,
                e,
                context=self.conversation(chat_id),
                type="telegram:chat",
                content=text,
                meta={"update_id": update_id, **({"chat_id": chat_id} if chat_id is not None else {})},
                last=True,  # the same JSON fails the same way: nothing to gain by trying again
            )
            if not parked:  # the store's failure or the hub's, not the update's: fetched again
                raise
            return None

    async def receive(self, update: Update) -> None:
        """Take one update that came on its own (a webhook POST); returns once it is recorded
        (or deliberately ignored)."""
        me = await self.client.ensure_ready()
        await self.take_or_park(update, me)

    async def take_or_park(self, update: Update, me: Any) -> None:
        """`take()`, or park ``update`` once it has failed `PARK_AFTER` times;
        returns when it may be confirmed to Telegram. Raises (the update is tried again)
        while it has failed fewer times, or whenever the store failed."""
        key = self.scoped(_update_key(update))
        try:
            await self.take(update, me)
        except Exception as e:
            chat_id, content, meta = _what_it_was(update)
            context = self.conversation(chat_id)
            if not await self.poison.failed(key, e, context=context, type="telegram:chat", content=content, meta=meta):
                raise
        else:
            self.poison.succeeded(key)

    async def take(self, update: Update, me: Any) -> None:
        """Take ``update``, sent to the bot ``me``: recorded in the inbox, or ignored (logged why);
        a press of an approval's button is answered through the hub instead."""
        if is_press(update.callback_query):
            assert update.callback_query is not None
            await answer_press(update.callback_query, self.hub)
            return
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
            {"chat_id": verdict.chat_id, "account": self.account},
            verdict.text,
            user=str(verdict.user_id),
            platform_id=self.scoped(verdict.platform_id),
            meta=verdict.meta(),
            media=[dataclasses.replace(m, ref=account_key(self.account, m.ref)) for m in verdict.media],
            command=self.commands.parse(update),  # /start, /cmd@thisbot: answered without the model
        )
        if sub.duplicate:
            log.info("telegram: message %s was recorded before: not answered again", verdict.platform_id)
            return
        if self.settings.typing:
            self.typing.watch(verdict.chat_id, sub.result)

    async def _private_allows(self, verdict: Inbound, names: tuple[str | None, ...]) -> bool:
        """``dm_policy`` in a private chat; an unknown user under ``"pairing"`` is sent the
        code, once, in the background (the poller or the webhook goes on meanwhile)."""
        chat_id = verdict.chat_id
        return await admit_private(
            self.hub.access,
            self.hub.create_task,
            "telegram",
            self.settings,
            verdict.user_id,
            *names,
            send=lambda text: self.client.send_text(chat_id, text),  # through the governor: paced, retried
            user_name=verdict.name or None,
            user_handle=verdict.username,
        )

    def _guard_allows(self, verdict: Inbound) -> bool:
        if self.guard is None:
            return True
        return self.guard.allow(verdict.chat_id, from_bot=verdict.is_bot)

    async def stop(self) -> None:
        """Stop the typing indicators."""
        await self.typing.stop()


def _chat_id_of(raw: Any) -> int | None:
    """The chat an unparsed update's message was in, where its JSON says so plainly."""
    message = raw.get("message") if isinstance(raw, dict) else None
    chat = message.get("chat") if isinstance(message, dict) else None
    chat_id = chat.get("id") if isinstance(chat, dict) else None
    return chat_id if isinstance(chat_id, int) and not isinstance(chat_id, bool) else None


def _update_key(update: Update) -> str:
    """The id a parked update is known by: its message's, as the inbox knows a message
    (a redelivery is then refused), else the update's own."""
    message = update.effective_message
    if message is not None and message.chat is not None:
        return f"telegram:{message.chat.id}:{message.message_id}"
    return f"telegram:update:{update.update_id}"


def _what_it_was(update: Update) -> tuple[int | None, Any, dict[str, Any]]:
    """A poison update as a parked input: its chat and its text when they can be read, the
    update's JSON when not."""
    meta: dict[str, Any] = {"update_id": update.update_id}
    message = update.effective_message
    try:
        raw = update.to_json()
    except Exception:  # the update may be what broke
        raw = repr(update)
    if message is None or message.chat is None:
        return None, raw, meta
    meta["chat_id"] = message.chat.id
    return message.chat.id, message.text or message.caption or raw, meta

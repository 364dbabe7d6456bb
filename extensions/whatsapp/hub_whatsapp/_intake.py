"""Meta's webhooks into the hub: each message of a POST checked (who may talk to the bot:
``allowed_users``, ``dm_policy`` with pairing, the loop guard), recorded in the hub's inbox
(``platform_id = "whatsapp:<wamid>"``), and only then the POST answered 200.

Meta retries a webhook until it gets 200: a POST whose message could not be recorded is
answered 503 and delivered again, and a redelivery (the same ``wamid``) is refused by the
inbox, so it is answered once. A message that fails to be taken for a reason of its own (a
shape the intake does not read, a bug) is counted; at its `PARK_AFTER`-th failure it
is parked in the inbox with its secrets masked (``hub inbox``), the POST answered 200, and
intake goes on. A store failure is never counted: Meta delivers until the store takes it.

Statuses of the bot's messages come in the same webhooks: a ``failed`` one with error
131047 (the user's 24-hour window had closed) closes that user's window, and the message is
sent once more through the configured template, if there is one.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from hub.platform import AllowList, PoisonUpdates, SendFailed, TypingIndicator, admit_private, parse_command

from ._client import OUTSIDE_WINDOW, WhatsAppClient
from ._events import CHAT, Inbound, Status, Unreadable, read_payload
from ._settings import WhatsAppSettings
from ._window import Windows

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["Intake", "PARK_AFTER", "Sent"]

log = logging.getLogger("hub_whatsapp")

PARK_AFTER = 3
"""Failures (not the store's) after which a message is parked instead of answered 503."""
_SENT_REMEMBERED = 2000


class Sent:
    """The free-form texts this worker sent lately, by ``wamid``: what a ``failed`` status for
    the window (131047) resends through the template, once (its entry is taken then)."""

    def __init__(self) -> None:
        self._texts: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def add(self, wamid: str, wa_id: str, text: str) -> None:
        self._texts[wamid] = (wa_id, text)
        while len(self._texts) > _SENT_REMEMBERED:
            self._texts.popitem(last=False)

    def take(self, wamid: str) -> tuple[str, str] | None:
        return self._texts.pop(wamid, None)


class Intake:
    """Takes each webhook's messages and statuses; one per subscribed input."""

    def __init__(
        self,
        client: WhatsAppClient,
        settings: WhatsAppSettings,
        hub: Hub,
        send: Callable[..., Awaitable[Any]],
        windows: Windows,
        sent: Sent,
    ) -> None:
        self.client = client
        self.settings = settings
        self.hub = hub
        self.send = send
        self.windows = windows
        self.sent = sent
        self.users = AllowList(settings.allowed_users)
        self.bots = set(settings.bots)
        self.guard = settings.loop_guard()
        self.poison = PoisonUpdates("whatsapp", hub.inbox, park_after=PARK_AFTER, redactor=hub.redactor)
        # "typing..." is shown on a message and cleared by Meta after 25 s: renewed every 20
        self.typing = TypingIndicator("whatsapp", self._show_typing, create_task=hub.create_task, interval=20.0)
        self._newest: OrderedDict[str, str] = OrderedDict()  # wa_id -> newest message id, for typing
        self._lock = asyncio.Lock()  # one message at a time keeps a user's order

    # --- a webhook ------------------------------------------------------------------------

    async def take_payload(self, payload: Any) -> None:
        """Take every message and status of one webhook; returns when it may be answered 200.

        Raises:
            Exception: a message was neither recorded nor parked (answered 503: Meta delivers
                the webhook again; what was recorded is refused then as a redelivery).
        """
        try:
            messages, statuses = read_payload(payload, self.settings.phone_number_id)
        except Unreadable as e:
            messages, statuses = [Unreadable(str(e), raw=payload)], []
        failed: Exception | None = None
        for message in messages:
            try:
                await self.take_or_park(message)
            except Exception as e:  # the others are taken all the same; this one comes again
                failed = failed or e
        for status in statuses:
            await self.status(status)
        if failed is not None:
            raise failed

    async def take_or_park(self, message: Inbound | Unreadable) -> None:
        """`take()`, or park ``message`` once it has failed `PARK_AFTER` times.
        Raises while it has failed fewer times, or whenever the store failed."""
        key = _key(message)
        try:
            if isinstance(message, Unreadable):
                raise message
            async with self._lock:
                await self.take(message)
        except Exception as e:
            context, content, meta = _what_it_was(message)
            if not await self.poison.failed(key, e, context=context, type=CHAT, content=content, meta=meta):
                raise
        else:
            self.poison.succeeded(key)

    async def take(self, m: Inbound) -> None:
        """Record ``m`` in the inbox, or ignore it (logged why); raises when recording fails."""
        await self.windows.opened(m.wa_id, m.timestamp)  # the user wrote: their window is open
        from_bot = m.wa_id in self.bots
        if from_bot and await self.hub.received(m.platform_id):
            return  # a redelivered bot message must not use up one of the loop guard's turns
        if self.guard is not None and not self.guard.allow(m.wa_id, from_bot=from_bot):
            log.info(
                "whatsapp: %s: loop guard: not answering bot %s (%d answers to bots in %.0fs)",
                m.wa_id,
                m.wa_id,
                self.settings.loop_guard_turns,
                self.settings.loop_guard_window,
            )
            return
        if not await self._allows(m):
            return
        command = parse_command(m.text, self.hub.commands.names()) if m.kind == "text" else None
        sub = await self.send(
            CHAT,
            {"wa_id": m.wa_id},
            m.text,
            user=m.wa_id,
            platform_id=m.platform_id,
            meta=m.meta(),
            media=list(m.media),
            command=command,
        )
        if sub.duplicate:
            log.debug("whatsapp: message %s was recorded before: not answered again", m.wamid)
            return
        if self.settings.typing and command is None:
            self._newest[m.wa_id] = m.wamid
            self._newest.move_to_end(m.wa_id)
            while len(self._newest) > _SENT_REMEMBERED:
                self._newest.popitem(last=False)
            self.typing.watch(m.wa_id, sub.result)  # shows typing, which marks it read too
        elif self.settings.read_receipts:
            self.hub.create_task(self._mark_read(m.wamid), name=f"whatsapp: read {m.wamid}")

    async def _allows(self, m: Inbound) -> bool:
        """``dm_policy`` (every WhatsApp chat is private), else ``allowed_users``."""
        aliases = (f"+{m.wa_id}",)
        if self.settings.dm_policy != "open":
            return await admit_private(
                self.hub.access,
                self.hub.create_task,
                "whatsapp",
                self.settings,
                m.wa_id,
                *aliases,
                send=lambda text: self.client.send_text(m.wa_id, text),  # paced and retried
                user_name=m.name or None,
            )
        if not self.users.allows(m.wa_id, *aliases):
            log.info("whatsapp: user %s is not on allowed_users: ignored", m.wa_id)
            return False
        return True

    async def _mark_read(self, wamid: str) -> None:
        try:
            await self.client.mark_read(wamid)
        except SendFailed as e:
            log.info("whatsapp: message %s was not marked read: %s", wamid, e)

    async def _show_typing(self, wa_id: str) -> None:
        wamid = self._newest.get(wa_id)
        if wamid is not None:
            await self.client.mark_read(wamid, typing=True)

    # --- statuses of the bot's messages ---------------------------------------------------

    async def status(self, st: Status) -> None:
        """A ``failed`` status is logged; for the 24-hour window (131047) the user's window is
        closed and the message resent once through the template (when one is configured)."""
        if st.status != "failed":
            return
        if OUTSIDE_WINDOW not in st.error_codes:
            log.warning("whatsapp: message %s to %s failed: %s %s", st.wamid, st.wa_id, st.error_codes, st.error)
            return
        await self.windows.closed(st.wa_id, st.timestamp)
        sent = self.sent.take(st.wamid)
        if not self.settings.template or sent is None:
            log.warning(
                "whatsapp: message %s to %s was refused: their 24-hour window had closed (131047); "
                "%s until they write again",
                st.wamid,
                st.wa_id,
                "later messages go through the template" if self.settings.template else "later messages are skipped",
            )
            return
        log.warning(
            "whatsapp: message %s to %s was refused: their 24-hour window had closed (131047); sent again "
            "through the template %r",
            st.wamid,
            st.wa_id,
            self.settings.template,
        )
        self.hub.create_task(self._resend(sent), name=f"whatsapp: template for {st.wamid}")

    async def _resend(self, sent: tuple[str, str]) -> None:
        wa_id, text = sent
        try:
            await self.client.send_template(wa_id, text)
        except SendFailed as e:  # once, never again: the run's log has the original
            log.warning("whatsapp: the template to %s was not sent either: %s", wa_id, e)

    async def stop(self) -> None:
        await self.typing.stop()


def _key(message: Inbound | Unreadable) -> str:
    """The id a failing message is known by: its wamid, as the inbox knows it (a redelivery is
    then one message), else its JSON's hash."""
    if isinstance(message, Inbound):
        return message.platform_id
    if message.wamid:
        return f"whatsapp:{message.wamid}"
    raw = json.dumps(message.raw, default=repr, sort_keys=True).encode()
    return f"whatsapp:payload:{hashlib.sha256(raw).hexdigest()[:32]}"


def _what_it_was(message: Inbound | Unreadable) -> tuple[str, Any, dict[str, Any]]:
    """A poison message as a parked input: its user's conversation when it can be read, and
    its text (its JSON when it has none)."""
    raw = json.dumps(message.raw, default=repr, sort_keys=True)
    if isinstance(message, Inbound):
        return f"{CHAT}:{message.wa_id}", message.text or raw, {**message.meta(), "message": raw}
    meta: dict[str, Any] = {"message": raw, "wamid": message.wamid, "wa_id": message.wa_id}
    if message.wa_id:
        return f"{CHAT}:{message.wa_id}", raw, meta
    return "whatsapp", raw, meta

"""A mail into the hub: whether to answer it (not the bot's own, not an automatic mail, an
authenticated sender when ``require_authenticated``, ``allowed_senders`` and ``dm_policy``
with pairing), whether its subject is a command (``/new``, ``/stop``, ``/help``), then the
mail recorded in the hub's inbox (``platform_id = "email:<Message-ID>"``: a mail read
again is refused there, so it is answered once).

A mail that fails to be taken for a reason of its own (one that cannot be read, a bug) is
counted; at its `PARK_AFTER`-th failure it is parked in the inbox with its secrets
masked (``hub inbox``) and the reader goes past it. A store failure is never counted: the
mail is read again until the store takes it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable
from email import message_from_bytes, policy
from typing import TYPE_CHECKING, Any

from hub.platform import AllowList, PoisonUpdates, admit_private, parse_command

from ._mail import CHAT, Inbound, read_mail
from ._settings import EmailSettings
from ._smtp import Outbox, build_reply

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["Intake", "PARK_AFTER", "THREAD_KEY", "NotTaken"]

log = logging.getLogger("hub_email")

PARK_AFTER = 3
"""Failures (not the store's) after which a mail is parked instead of read again."""
THREAD_KEY = "email:thread:"
"""Memory key prefix of a thread's newest mail (whom a reply goes to when no input names one)."""
_PARKED_CHARS = 64_000


class NotTaken(Exception):
    """A mail failed to be taken and is not parked yet: it is read again."""


class Intake:
    """Takes each mail the reader hands over."""

    def __init__(self, settings: EmailSettings, hub: Hub, send: Callable[..., Awaitable[Any]], outbox: Outbox) -> None:
        self.settings = settings
        self.hub = hub
        self.send = send
        self.outbox = outbox
        self.senders = AllowList(settings.allowed_users)
        self.bots = frozenset(settings.bots)
        self.guard = settings.loop_guard()
        self.poison = PoisonUpdates("email", hub.inbox, park_after=PARK_AFTER, redactor=hub.redactor)

    async def take_or_park(self, raw: bytes, ref: str) -> bool:
        """Take the mail ``raw`` (its attachments known as ``ref``): True when it was
        recorded or parked (it may be flagged read), False when it is not for the bot.

        Raises:
            NotTaken: it failed, fewer than `PARK_AFTER` times, or the store failed.
        """
        inbound: Inbound | None = None
        key = f"email:sha256-{hashlib.sha256(raw).hexdigest()[:32]}@hub.invalid"
        try:
            inbound = read_mail(raw, ref=ref)
            key = inbound.platform_id
            taken = await self.take(inbound)
        except Exception as e:
            context, content, meta = _what_it_was(raw, inbound)
            if await self.poison.failed(key, e, context=context, type=CHAT, content=content, meta=meta):
                return True
            raise NotTaken(f"mail {key} was not taken ({type(e).__name__}: {e})") from e
        self.poison.succeeded(key)
        return taken

    async def take(self, m: Inbound) -> bool:
        """Record ``m`` in the inbox (True), or leave it (False, logged why)."""
        if m.sender == self.settings.address:
            log.debug("email: %s is the bot's own mail: not answered", m.message_id)
            return False
        if m.auto:
            log.info("email: %s from %s is an automatic mail (%s): not answered", m.message_id, m.sender, m.auto)
            return False
        if self.settings.require_authenticated and not m.authenticated:
            log.warning(
                "email: %s from %s is not answered: %s (require_authenticated = true)",
                m.message_id,
                m.sender,
                m.auth_reason,
            )
            return False
        thread = m.root
        if not await self._allows(m):
            return False
        from_bot = m.sender in self.bots
        if from_bot and await self.hub.received(m.platform_id):
            return True  # read again: it must not use up one of the loop guard's turns
        if self.guard is not None and not self.guard.allow(thread, from_bot=from_bot):
            log.info(
                "email: thread %s: loop guard: not answering bot %s (%d answers to bots in %.0fs)",
                thread,
                m.sender,
                self.settings.loop_guard_turns,
                self.settings.loop_guard_window,
            )
            return False
        await self.hub.memory.set(THREAD_KEY + thread, m.meta(thread))
        command = parse_command(m.subject, self.hub.commands.names())
        text = m.text if command is None else m.subject
        if not text and m.media:
            text = "(sent files without text)"
        sub = await self.send(
            CHAT,
            {"thread": thread},
            text,
            user=m.sender,
            platform_id=m.platform_id,
            meta=m.meta(thread),
            media=list(m.media),
            command=command,
        )
        if sub.duplicate:
            log.info("email: %s was recorded before: not answered again", m.message_id)
        return True

    async def _allows(self, m: Inbound) -> bool:
        """``dm_policy`` (every thread is private), else ``allowed_senders``; a whole domain
        is listed as ``@example.org``."""
        domain = "@" + m.sender.rpartition("@")[2]
        if self.settings.dm_policy != "open":

            async def tell(text: str) -> Any:
                msg = build_reply(
                    self.settings,
                    to=m.reply_to,
                    subject=m.subject,
                    text=text,
                    in_reply_to=m.message_id,
                    references=m.references,
                )
                return await self.outbox.send(msg)

            return await admit_private(
                self.hub.access,
                self.hub.create_task,
                "email",
                self.settings,
                m.sender,
                domain,
                send=tell,
                user_name=m.name or None,
            )
        if not self.senders.allows(m.sender, domain):
            log.info("email: %s is not on allowed_senders: ignored", m.sender)
            return False
        return True


def _what_it_was(raw: bytes, m: Inbound | None) -> tuple[str, Any, dict[str, Any]]:
    """A poison mail as a parked input: its thread when it could be read, and its text (the
    mail itself when it has none)."""
    text = raw.decode("utf-8", "replace")[:_PARKED_CHARS]
    if m is not None:
        return f"{CHAT}:{m.root}", m.text or text, {**m.meta(m.root), "mail": text}
    msg = message_from_bytes(raw, policy=policy.compat32)
    meta = {"mail": text, "from": str(msg.get("From", "")), "subject": str(msg.get("Subject", ""))}
    return "email", text, meta

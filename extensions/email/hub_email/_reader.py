"""The reading loop: new mail by UID, each handed to the intake, then flagged ``\\Seen`` and
the UID cursor moved on, kept in the hub's memory (``email:cursor:<address>:<folder>``,
``_cursor``: it only moves forward). A mail is recorded before it is flagged or the cursor passes it,
so a crash in between reads it again after the restart, and the inbox refuses it then (its
Message-ID is known): answered once.

UIDs mean something only under one UIDVALIDITY. At the first start, and when the server
gives the folder a new UIDVALIDITY (the folder was recreated or restored), the UIDs kept
are worthless: the reader takes the folder's unread mail (what was never answered: the bot
flags what it takes) and starts its cursor at the folder's end. Mail read before is not
answered again, and a mail read but not yet flagged is refused by the inbox.

New mail is awaited with IDLE (renewed every ``poll_interval`` seconds), or by polling
where the server has no IDLE. A mail that makes the intake fail stops the loop at it: it is
read again after a short, growing delay, and at its third failure parked, so one mail never
wedges the mailbox. With several workers only the holder of the lease
``email:imap:<address>`` reads.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import TYPE_CHECKING

from hub.platform import Backoff

from ._cursor import CURSOR_KEY, Cursor, Cursors
from ._imap import ImapError, LoginRefused, Mailbox
from ._intake import Intake, NotTaken
from ._settings import EmailSettings

if TYPE_CHECKING:
    from hub import Hub

__all__ = ["Reader"]

log = logging.getLogger("hub_email")


class Reader:
    """Reads the folder until cancelled, handing each new mail to ``intake``."""

    def __init__(
        self,
        settings: EmailSettings,
        intake: Intake,
        hub: Hub,
        *,
        tls_context: ssl.SSLContext | None = None,
        retry_first: float = 0.2,
    ) -> None:
        self.settings = settings
        self.intake = intake
        self.hub = hub
        self.tls_context = tls_context
        self.key = f"{CURSOR_KEY}{settings.address}:{settings.folder}"
        self.cursors = Cursors(hub.memory)
        self.retry_first = retry_first

    async def run(self) -> None:
        """Read until cancelled; after an error wait a bounded, growing delay (logged)."""
        backoff = Backoff(first=self.retry_first, most=60.0, jitter=0.2)
        try:
            while True:
                try:
                    await self._session(backoff)
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    self.hub.metrics.platform_connected("email", False)
                    await asyncio.sleep(self._after(e, backoff))
        finally:  # stopped, or the lease went to another worker
            self.hub.metrics.platform_connected("email", False)

    def _after(self, e: Exception, backoff: Backoff) -> float:
        delay = backoff.next()
        match e:
            case NotTaken():
                log.warning("email: %s; read again in %.1fs", e, delay)
            case LoginRefused():
                delay = max(delay, 60.0)
                log.error("email: %s; trying again in %.0fs", e, delay)
            case ImapError() | OSError() | TimeoutError():
                log.warning("email: IMAP: %s; reconnecting in %.1fs", e, delay)
            case _:
                log.error("email: reading failed (%s: %s); again in %.1fs", type(e).__name__, e, delay, exc_info=e)
        return delay

    async def _session(self, backoff: Backoff) -> None:
        box = Mailbox(self.settings, tls_context=self.tls_context)
        await box.connect()
        try:
            validity, uidnext = await box.select()
            self.hub.metrics.platform_connected("email", True)
            if self.settings.idle and box.has_idle:
                log.info("email: waiting for new mail with IDLE")
            else:
                why = "idle = false" if not self.settings.idle else "the server has no IDLE"
                log.info("email: polling for new mail every %gs (%s)", self.settings.poll_interval, why)
            cursor = await self.cursors.get(self.key)
            if cursor is None or cursor.uidvalidity != validity:
                cursor = await self._restart_at(box, cursor, validity, uidnext)
            while True:
                for uid in await box.after(cursor.uid):
                    await self._take(box, validity, uid)
                    cursor = await self.cursors.advance(self.key, Cursor(validity, uid))
                backoff.reset()
                await box.wait(self.settings.poll_interval)
        finally:
            await box.close()

    async def _restart_at(self, box: Mailbox, old: Cursor | None, validity: int, uidnext: int) -> Cursor:
        """The first start, or a new UIDVALIDITY: the unread mail taken, the cursor at the end."""
        if old is None:
            log.info("email: first start on %s: reading its unread mail", self.settings.folder)
        else:
            log.warning(
                "email: %s has a new UIDVALIDITY (%d, was %d): the UIDs kept mean nothing now; reading its "
                "unread mail, and none read before is answered again",
                self.settings.folder,
                validity,
                old.uidvalidity,
            )
        unread = await box.search("UNSEEN")
        for uid in unread:
            await self._take(box, validity, uid)
        return await self.cursors.advance(self.key, Cursor(validity, max([uidnext - 1, *unread])))

    async def _take(self, box: Mailbox, validity: int, uid: int) -> None:
        raw = await box.fetch(uid)
        if raw is None:
            return  # expunged meanwhile
        if await self.intake.take_or_park(raw, f"{validity}/{uid}"):
            await box.mark_seen(uid)

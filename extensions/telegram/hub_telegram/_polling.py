"""Long polling: take each update into the hub (``_intake``), then confirm it to Telegram.

PTB's ``Updater`` confirms updates as soon as it has fetched them, so a crash between
fetching and recording would lose them. This loop calls ``getUpdates`` itself and moves the
offset past an update only after the intake has recorded it in the hub's inbox (or decided
to ignore it, or parked it after it failed every time: one bad update does not stop intake); the offset is persisted in the hub's memory (``telegram:offset``) after each
batch, so a restart resumes exactly there. The batch is fetched raw and each update parsed
on its own: python-telegram-bot fails the whole batch on one update it cannot parse, which
would be fetched again forever; such an update is parked and the offset moves past it.
A redelivered message is refused by the inbox
(its platform id is known) and is not answered twice.

With several workers only the holder of the lease ``telegram:poll:<bot id>`` polls (the
extension runs `Poller.run()` under it). In webhook mode nothing polls: updates come
through the webhook (``_webhook``) to the same intake.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from typing import Any

from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TimedOut
from telegram.warnings import PTBUserWarning

from hub import HubError
from hub.platform import Backoff

from ._client import TelegramClient, retry_after_seconds
from ._intake import ALLOWED_UPDATES, Intake
from ._settings import TelegramSettings

__all__ = ["Poller", "OFFSET_KEY"]

log = logging.getLogger("hub_telegram")

OFFSET_KEY = "telegram:offset"
"""The default account's; another account's is ``telegram:offset:ACCOUNT``."""
_READ_MARGIN = 5.0
"""Seconds a long poll's read may take past its ``timeout`` (PTB's own default margin)."""


class Poller:
    """Calls ``getUpdates`` until cancelled, handing each update to ``intake``."""

    def __init__(self, client: TelegramClient, settings: TelegramSettings, intake: Intake) -> None:
        self.client = client
        self.settings = settings
        self.intake = intake
        self.hub = intake.hub
        self.offset: int | None = None
        self.offset_key = f"{OFFSET_KEY}:{client.account}" if client.account else OFFSET_KEY
        self._webhook_cleared = False

    async def run(self) -> None:
        """Poll until cancelled. After an error, wait a bounded, growing delay (logged)."""
        stored = await self.hub.memory.get(self.offset_key)
        self.offset = int(stored) if stored is not None else None
        backoff = Backoff(first=1.0, most=60.0, jitter=0.2)  # never a tight loop, never over a minute
        try:
            while True:
                try:
                    await self._once()
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    self.hub.metrics.platform_connected(self.client.label, False)
                    await asyncio.sleep(self._after(e, backoff))
                else:
                    backoff.reset()
        finally:  # stopped, or the lease went to another worker
            self.hub.metrics.platform_connected(self.client.label, False)

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
        self.hub.metrics.platform_connected(self.client.label, True)  # Telegram answers this worker
        params: dict[str, Any] = {"timeout": self.settings.poll_timeout, "allowed_updates": list(ALLOWED_UPDATES)}
        if self.offset is not None:
            params["offset"] = self.offset
        # fetched raw on purpose (see above): PTB's warning suggests get_updates, which parses the
        # batch whole. Set before each call, as a test runner resets the filters between tests.
        warnings.filterwarnings("ignore", message=r"Please use 'Bot\.getUpdates'", category=PTBUserWarning)
        batch = await self.client.bot.do_api_request(
            "getUpdates", api_kwargs=params, read_timeout=self.settings.poll_timeout + _READ_MARGIN
        )
        if not isinstance(batch, list) or not batch:
            return
        start = self.offset
        try:
            for raw in batch:
                update = await self.intake.parse_or_park(raw)
                if update is not None:
                    await self.intake.take_or_park(update, me)
                # recorded (or deliberately ignored, or parked): only now may Telegram forget
                # it. A redelivery is the inbox's to refuse (send says duplicate), not ours.
                update_id = raw.get("update_id") if isinstance(raw, dict) else None
                if isinstance(update_id, int) and (self.offset is None or update_id >= self.offset):
                    self.offset = update_id + 1
        finally:
            if self.offset != start:
                await self.hub.memory.set(self.offset_key, self.offset)

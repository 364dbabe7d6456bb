"""Webhook mode: Telegram POSTs each update to ``webhook_url``, served on the hub's ``[http]``
endpoint at that URL's path, so any worker behind a load balancer can take updates.

The hub checks ``X-Telegram-Bot-Api-Secret-Token`` against ``webhook_secret`` before it
reads the body (401, nothing recorded), caps the body and parses it. An update is handled
exactly as a polled one, by the intake (`Intake.receive()`: filters, access, the inbox) and
the POST is answered only once the update is recorded: when recording fails the answer is
503 and Telegram delivers it again; a redelivery is refused by the inbox (its platform id
is known), so it is answered once.

``setWebhook`` (url, secret, allowed updates) is called by one worker: the one that holds
the lease ``telegram:webhook:<bot id>``, once per holding.
"""

from __future__ import annotations

import asyncio
import logging

from telegram.error import RetryAfter, TelegramError

from hub import HubError, Route, RouteAnswer, RouteRequest
from hub.platform import Backoff

from ._client import TelegramClient, retry_after_seconds
from ._intake import ALLOWED_UPDATES, Intake
from ._settings import TelegramSettings

__all__ = ["Webhook", "SECRET_HEADER"]

log = logging.getLogger("hub_telegram")

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class Webhook:
    """The route Telegram posts to, and the one-time ``setWebhook`` under its lease."""

    def __init__(self, client: TelegramClient, settings: TelegramSettings) -> None:
        self.client = client
        self.settings = settings
        self.receiver: Intake | None = None  # set while the input is subscribed
        self.registered = asyncio.Event()  # setWebhook succeeded on this worker

    def route(self) -> Route:
        return Route(
            path=self.settings.webhook_path(),
            handler=self.handle,
            secret_header=SECRET_HEADER,
            secret=self.settings.webhook_secret.get_secret_value(),
            description="Telegram's updates (webhook mode)",
        )

    async def handle(self, request: RouteRequest) -> RouteAnswer:
        receiver = self.receiver
        if receiver is None:  # `hub chat`, or the input is stopping: Telegram tries again later
            return RouteAnswer(503, {"error": "Telegram updates are not taken by this hub now"})
        if not isinstance(request.data, dict) or not isinstance(request.data.get("update_id"), int):
            return RouteAnswer(400, {"error": "not a Telegram update: a JSON object with an integer update_id"})
        # recorded (or deliberately ignored, or parked: one the library cannot parse at once,
        # one that fails to be taken every time) before the answer; a store failure raises and
        # answers 503, so Telegram delivers it again
        update = await receiver.parse_or_park(request.data)
        if update is not None:
            await receiver.receive(update)
        receiver.hub.metrics.platform_connected(self.client.label, True)  # Telegram reaches this worker
        return RouteAnswer(200, {"ok": True})

    async def register(self) -> None:
        """Call setWebhook (retrying, with backoff), then hold on: run under the lease."""
        backoff = Backoff(first=1.0, most=60.0, jitter=0.2)
        while True:
            try:
                await self.client.ensure_ready()
                await self.client.bot.set_webhook(
                    url=self.settings.webhook_url,
                    secret_token=self.settings.webhook_secret.get_secret_value(),
                    allowed_updates=list(ALLOWED_UPDATES),
                )
            except RetryAfter as e:
                delay = retry_after_seconds(e)
                log.warning("telegram: setWebhook rate limited; retrying in %.0fs", delay)
            except (TelegramError, HubError) as e:
                delay = backoff.next()
                log.error("telegram: setWebhook failed (%s); retrying in %.0fs", e, delay)
            else:
                break
            await asyncio.sleep(delay)
        log.info("telegram: webhook set to %s", self.settings.webhook_url)
        self.registered.set()
        await asyncio.Event().wait()  # keep the lease: other workers need not set it again

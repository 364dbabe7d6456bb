"""The callback URL on the hub's ``[http]`` endpoint, at ``webhook_path``.

- **GET**: Meta's check of the URL (``hub.mode=subscribe``, ``hub.verify_token``,
  ``hub.challenge``): the challenge echoed as bare text when the token is ``verify_token``
  (compared in constant time), 403 otherwise.
- **POST**: every request must carry ``X-Hub-Signature-256``, the HMAC-SHA256 of its raw
  body keyed by ``app_secret`` (pywa's ``webhook_updates_validator``): the hub asks
  `MetaSignature` about the header before the body is read and about the body before
  it is parsed, so a forged request is refused (401) with nothing of it taken. Meta signs no
  timestamp, so a replay is not refused here: it is a redelivery, and the inbox refuses a
  message it has (by its ``wamid``).
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pywa_async.utils import webhook_updates_validator

from hub import Route, RouteAnswer, RouteRequest

from ._settings import WhatsAppSettings

if TYPE_CHECKING:
    from ._intake import Intake

__all__ = ["Webhook", "MetaSignature", "SIGNATURE_HEADER"]

log = logging.getLogger("hub_whatsapp")

SIGNATURE_HEADER = "X-Hub-Signature-256"
_SIGNATURE = re.compile(r"sha256=[0-9a-fA-F]{64}")


class MetaSignature:
    """A [`hub.RouteVerifier`][hub.RouteVerifier] for Meta's signed webhooks."""

    def __init__(self, app_secret: str) -> None:
        self._secret = app_secret

    def headers(self, headers: Mapping[str, str]) -> str | None:
        if not _SIGNATURE.fullmatch(headers.get(SIGNATURE_HEADER, "")):
            return f"{SIGNATURE_HEADER} is required: sha256= and the body's HMAC-SHA256 (a request signed by Meta)"
        return None

    def body(self, headers: Mapping[str, str], body: bytes) -> str | None:
        if not webhook_updates_validator(self._secret, body, headers.get(SIGNATURE_HEADER, "")):
            return f"{SIGNATURE_HEADER} does not match the body (is app_secret the app's App Secret?)"
        return None


class Webhook:
    """The route Meta calls: the GET check and the signed POSTs."""

    def __init__(self, settings: WhatsAppSettings) -> None:
        self.settings = settings
        self.intake: Intake | None = None  # set while the input is subscribed

    def route(self) -> Route:
        return Route(
            path=self.settings.webhook_path,
            handler=self.handle,
            verify=MetaSignature(self.settings.app_secret.get_secret_value()),
            get=self.challenge,
            description="WhatsApp's webhooks (Meta's Cloud API)",
        )

    async def challenge(self, request: RouteRequest) -> RouteAnswer:
        """Meta's verification request: its challenge back when the token matches."""
        query = request.query
        token = query.get("hub.verify_token", "")
        expected = self.settings.verify_token.get_secret_value()
        if query.get("hub.mode") != "subscribe" or not (
            token.isascii() and hmac.compare_digest(token.encode(), expected.encode())
        ):
            log.warning("whatsapp: a webhook verification with a wrong hub.verify_token was refused")
            return RouteAnswer(403, text="Forbidden")
        log.info("whatsapp: Meta verified the webhook at %s", self.settings.webhook_path)
        return RouteAnswer(200, text=query.get("hub.challenge", ""))

    async def handle(self, request: RouteRequest) -> RouteAnswer:
        intake = self.intake
        if intake is None:  # `hub chat`, or the input is stopping: Meta delivers it again
            return RouteAnswer(503, {"error": "WhatsApp webhooks are not taken by this hub now"})
        try:
            await intake.take_payload(request.data)
        except Exception as e:
            log.warning(
                "whatsapp: a webhook was not recorded (%s: %s): answered 503, Meta delivers it again",
                type(e).__name__,
                e,
            )
            return RouteAnswer(503, {"error": "not recorded: Meta delivers it again"})
        intake.hub.metrics.platform_connected("whatsapp", True)  # Meta reaches this worker
        return RouteAnswer(200, {"ok": True})

"""Everything the bot asks of signal-cli-rest-api (aiohttp against its documented REST API),
paced and retried by a [`Governor`][hub.platform.Governor], and the websocket it receives on.

Neither Python client fits an asyncio hub that must record each message before it lets it
be acknowledged: ``pysignalclirestapi`` is synchronous (``requests``) and has no websocket
receive; ``signalbot`` runs its own receive loop and handlers, and hands a message over
with no point between receipt and acknowledgement where the hub could record it. The REST
API is small and documented (``/v1/about``, ``/v2/send``, ``/v1/receive``, ...), so it is
called directly.

Errors map onto the governor's: a connection error or a 5xx is retried; 429 (signal-cli's
rate limit, which may need a captcha challenge: the log says so) waits; any other 4xx is final.
"""

from __future__ import annotations

import base64
import logging
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp

from hub import MediaError, MediaFile, MediaPart
from hub.platform import Backoff, Governor, PermanentSendError, RateLimit, RateLimited, TransientSendError, fetch_url

from ._settings import SignalSettings

__all__ = ["SignalClient", "SignalStartError", "MAX_LENGTH", "JSON_RPC_MODES"]

log = logging.getLogger("hub_signal")
T = TypeVar("T")

MAX_LENGTH = 2000
"""Characters in one message: Signal sends a longer text as an attachment, which not every
client shows inline, so a longer reply is split instead."""
JSON_RPC_MODES = ("json-rpc", "json-rpc-native")
"""The API's modes with a receive websocket (``GET /v1/about`` says which one runs)."""
RATE_LIMIT_WAIT = 30.0
"""Seconds to wait after a 429 that names no Retry-After (doubled at each one in a row)."""


class SignalStartError(Exception):
    """The REST API cannot serve this bot (not reachable, not json-rpc, number not there);
    ``hub run`` stops with this one line."""


class SignalClient:
    """The REST API for one number: send, react, receipts, typing, attachments, the socket."""

    def __init__(self, settings: SignalSettings) -> None:
        self.settings = settings
        self._http: aiohttp.ClientSession | None = None
        self._limits = Backoff(first=RATE_LIMIT_WAIT, most=max(RATE_LIMIT_WAIT, 300.0), jitter=0.1)
        self.governor = Governor(
            "signal",
            per_chat=RateLimit(*settings.chat_rate),
            global_=RateLimit(*settings.rate),
            max_attempts=settings.send_attempts,
            max_wait=settings.send_max_wait,
        )
        # receipts and typing are not messages: their own pacing, never in a reply's way
        self.marks = Governor("signal", per_chat=None, global_=RateLimit(*settings.rate), max_attempts=2, max_wait=10.0)

    @property
    def number_path(self) -> str:
        return quote(self.settings.number, safe="")

    def _headers(self) -> dict[str, str]:
        token = self.settings.token.get_secret_value()
        return {"Authorization": f"Bearer {token}"} if token else {}

    @property
    def http(self) -> aiohttp.ClientSession:
        """The session, made on first use (it lives on the running loop)."""
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(
                headers=self._headers(), timeout=aiohttp.ClientTimeout(total=60, sock_connect=10)
            )
        return self._http

    def report_to(self, hub: Any) -> None:
        self.governor.report_to(hub)
        self.governor.bot = self.settings.number

    # --- start ----------------------------------------------------------------------------

    async def check(self) -> str:
        """The API runs in json-rpc mode and has the bot's number; returns its mode.

        Raises:
            SignalStartError: it is not reachable, not in json-rpc mode, or lacks the number.
        """
        url = self.settings.url
        try:
            about = await self._get_json("/v1/about")
            accounts = await self._get_json("/v1/accounts")
        except (aiohttp.ClientError, OSError, ValueError) as e:
            raise SignalStartError(f"cannot reach signal-cli-rest-api at {url}: {type(e).__name__}: {e}") from e
        mode = str(about.get("mode") or "") if isinstance(about, dict) else ""
        if mode not in JSON_RPC_MODES:
            raise SignalStartError(
                f"signal-cli-rest-api at {url} runs in mode {mode or '?'!r}: the hub receives over its websocket, "
                "which needs MODE=json-rpc (or json-rpc-native) in the container's environment"
            )
        if not isinstance(accounts, list) or self.settings.number not in accounts:
            raise SignalStartError(
                f"{self.settings.number} is not registered or linked on signal-cli-rest-api at {url} "
                "(GET /v1/accounts does not list it): register or link it first (docs/platforms/signal.md)"
            )
        return mode

    async def _get_json(self, path: str) -> Any:
        async with self.http.get(self.settings.url + path) as resp:
            if resp.status == 401 or resp.status == 403:
                raise SignalStartError(f"the API at {self.settings.url} refused the token (HTTP {resp.status})")
            if resp.status >= 400:
                raise ValueError(f"{path} answered HTTP {resp.status}: {(await resp.text())[:200]}")
            return await resp.json(content_type=None)

    # --- requests under the governor ------------------------------------------------------

    async def _call(self, governor: Governor, chat: str, method: str, path: str, body: dict[str, Any]) -> Any:
        async def once() -> Any:
            try:
                async with self.http.request(method, self.settings.url + path, json=body) as resp:
                    text = await resp.text()
                    if resp.status < 300:
                        self._limits.reset()
                        return _json(text)
                    raise self._error(resp.status, text, resp.headers.get("Retry-After"), chat)
            except aiohttp.ClientError as e:
                raise TransientSendError(f"{type(e).__name__}: {e}") from e
            except TimeoutError as e:
                raise TransientSendError("the REST API did not answer in time") from e

        return await governor.send(chat, once)

    def _error(self, status: int, text: str, retry_after: str | None, chat: str) -> Exception:
        body = _json(text)
        reason = str(body.get("error") or text)[:300] if isinstance(body, dict) else text[:300]
        if status == 429:
            log.warning(
                "signal: rate limited by Signal sending to %s (%s); if it lasts, Signal wants a captcha: "
                "see POST /v1/accounts/{number}/rate-limit-challenge",
                chat,
                reason.split(". Use the attached")[0],
            )
            wait = float(retry_after) if retry_after and retry_after.isdigit() else self._limits.next()
            return RateLimited(wait, scope="global", message=f"rate limited by Signal ({reason})")
        if status >= 500:
            return TransientSendError(f"HTTP {status}: {reason}")
        return PermanentSendError(f"HTTP {status}: {reason}")

    # --- messages -------------------------------------------------------------------------

    async def send(
        self,
        to: str,
        text: str,
        *,
        files: tuple[MediaFile, ...] = (),
        quote: dict[str, Any] | None = None,
    ) -> int:
        """One message (text, files, a quote); its timestamp, Signal's id of it."""
        body: dict[str, Any] = {
            "number": self.settings.number,
            "recipients": [to],
            "message": text,
            "text_mode": self.settings.text_mode,
        }
        if files:
            body["base64_attachments"] = [_data_uri(f) for f in files]
        if quote:
            body["quote_timestamp"] = int(quote["timestamp"])
            body["quote_author"] = str(quote["author"])
            body["quote_message"] = str(quote.get("text") or "")
        sent = await self._call(self.governor, to, "POST", "/v2/send", body)
        stamp = sent.get("timestamp") if isinstance(sent, dict) else None
        if stamp is None or not str(stamp).isdigit():
            raise _unexpected("/v2/send", sent)
        return int(stamp)

    async def react(self, to: str, emoji: str, *, author: str, timestamp: int) -> None:
        """A reaction to the message ``timestamp`` of ``author`` in the chat ``to``."""
        body = {"recipient": to, "reaction": emoji, "target_author": author, "timestamp": int(timestamp)}
        await self._call(self.governor, to, "POST", f"/v1/reactions/{self.number_path}", body)

    async def read(self, author: str, timestamp: int) -> None:
        """A read receipt to ``author`` for their message ``timestamp``."""
        body = {"receipt_type": "read", "recipient": author, "timestamp": int(timestamp)}
        await self._call(self.marks, author, "POST", f"/v1/receipts/{self.number_path}", body)

    async def typing(self, to: str) -> None:
        """ "typing..." in the chat ``to`` (Signal's clients show it for about 15 s)."""
        await self._call(self.marks, to, "PUT", f"/v1/typing-indicator/{self.number_path}", {"recipient": to})

    # --- attachments in and the socket ----------------------------------------------------

    async def fetch(self, part: MediaPart, max_bytes: int) -> bytes:
        """An attachment's bytes from the API (signal-cli downloaded it), at most ``max_bytes``
        (capped while read; refused unread when the envelope said it is larger)."""
        if part.size is not None and part.size > max_bytes:
            raise MediaError(f"it is {part.size} bytes, over the limit of {max_bytes}", name=part.name)
        url = f"{self.settings.url}/v1/attachments/{quote(part.ref, safe='')}"
        return await fetch_url(url, max_bytes=max_bytes, name=part.name, headers=self._headers())

    def receive_url(self) -> str:
        base = self.settings.url
        scheme = "wss" if base.startswith("https") else "ws"
        return f"{scheme}{base[base.index(':') :]}/v1/receive/{self.number_path}"

    async def connect(self) -> aiohttp.ClientWebSocketResponse:
        """The receive websocket; pings every 20 s, so a dead connection is noticed."""
        return await self.http.ws_connect(self.receive_url(), heartbeat=20.0, max_msg_size=16 * 1024 * 1024)

    async def close(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.close()


def _json(text: str) -> Any:
    import json

    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return {}


def _unexpected(path: str, body: Any) -> PermanentSendError:
    return PermanentSendError(f"{path} answered without a timestamp: {str(body)[:200]}")


def _data_uri(file: MediaFile) -> str:
    """An attachment as ``/v2/send`` takes it: ``data:<mime>;filename=<name>;base64,<data>``."""
    name = (file.name or "file").replace(";", "_").replace(",", "_")
    return f"data:{file.mime};filename={name};base64,{base64.b64encode(file.data).decode('ascii')}"

"""Everything the bot sends to the Graph API (``pywa_async``), paced and retried by a
[`Governor`][hub.platform.Governor] under Meta's limits, and the media it downloads.

pywa builds ``https://graph.facebook.com/v{version}/...`` itself and has no base-URL option;
it takes an ``httpx.AsyncClient``, whose transport here sends that host to ``base_url``
when one is set (a loopback fake in tests). Meta's errors map onto the governor's:
131056 (pair rate limit) pauses that user, 130429 (throughput), 80007 and 4 pause every
send, each with a growing backoff since Meta gives no ``Retry-After``; 5xx, ``is_transient``
errors and network errors are retried; 131047 (the 24-hour window closed) is
`OutsideWindow`, never retried as it is; the rest are final.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from pywa_async import WhatsApp
from pywa_async.errors import WhatsAppError
from pywa_async.types.templates import TemplateLanguage

from hub import MediaError, MediaFile, MediaPart
from hub.platform import (
    AudioClip,
    Backoff,
    Governor,
    MediaHosts,
    PermanentSendError,
    RateLimit,
    RateLimited,
    Resolve,
    TransientSendError,
    fetch_url,
)

from ._settings import GRAPH_HOST, MEDIA_HOSTS, WhatsAppSettings

__all__ = ["WhatsAppClient", "WhatsAppStartError", "OutsideWindow", "Identity", "MAX_LENGTH", "mapped"]

log = logging.getLogger("hub_whatsapp")
T = TypeVar("T")

MAX_LENGTH = 4096
"""Characters in one text message's body."""
CAPTION_LENGTH = 1024
IMAGE_TYPES = ("image/jpeg", "image/png")
IMAGE_MAX_BYTES = 5 * 1024 * 1024
"""Meta's limit for a picture; a larger one (or another type) goes as a document."""
AUDIO_TYPES = ("audio/aac", "audio/amr", "audio/mpeg", "audio/mp4", "audio/ogg")
OUTSIDE_WINDOW = 131047
PAIR_RATE_LIMIT = 131056
THROUGHPUT = 130429
GLOBAL_LIMITS = (THROUGHPUT, 80007, 4, 131048)
_AUTH_CODES = (190, 10, 200)


class WhatsAppStartError(Exception):
    """The Graph API refused the token or the number; ``hub run`` stops with this one line."""


class OutsideWindow(PermanentSendError):
    """Meta refused a free-form message: the user has not written within 24 hours (131047)."""


@dataclass(frozen=True, slots=True)
class Identity:
    """The business number the bot sends from."""

    phone_number_id: str
    display_number: str
    name: str


class _Rerouted(httpx.AsyncBaseTransport):
    """Sends requests for ``graph.facebook.com`` to ``base`` (the path kept after it)."""

    def __init__(self, base: str, inner: httpx.AsyncBaseTransport) -> None:
        self.base = httpx.URL(base)
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == GRAPH_HOST:
            path = self.base.path.rstrip("/") + request.url.path
            request.url = request.url.copy_with(
                scheme=self.base.scheme, host=self.base.host, port=self.base.port, path=path
            )
            request.headers["Host"] = self.base.netloc.decode("ascii")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Limits:
    """How long to wait after Meta's rate-limit errors: it sends no ``Retry-After``, so each
    limit hit in a row waits longer (a success resets it)."""

    def __init__(self, pair: float, throughput: float) -> None:
        self.pair = Backoff(first=pair, most=max(pair, 60.0), jitter=0.1)
        self.throughput = Backoff(first=throughput, most=max(throughput, 60.0), jitter=0.1)

    def reset(self) -> None:
        self.pair.reset()
        self.throughput.reset()


def mapped(e: WhatsAppError | httpx.HTTPError, limits: _Limits) -> Exception:
    """A pywa (or httpx) error as the governor's: rate limited, transient, final."""
    if isinstance(e, httpx.HTTPError):
        return TransientSendError(f"{type(e).__name__}: {e}")
    code, status = e.code, e.status_code or 0
    what = f"{code} {e.message}".strip()
    if code == PAIR_RATE_LIMIT:
        return RateLimited(limits.pair.next(), scope="chat", message=f"pair rate limit ({what})")
    if code in GLOBAL_LIMITS:
        return RateLimited(limits.throughput.next(), scope="global", message=f"rate limited by Meta ({what})")
    if code == OUTSIDE_WINDOW:
        return OutsideWindow(f"outside the 24-hour window ({what})")
    if status >= 500 or e.is_transient or code in (1, 2, 131000, 131016):
        return TransientSendError(what)
    return PermanentSendError(what)


class WhatsAppClient:
    """The Graph API client of one number: messages, files, reactions, read receipts, typing."""

    def __init__(self, settings: WhatsAppSettings, *, resolve: Resolve | None = None) -> None:
        self.settings = settings
        self.identity: Identity | None = None
        self._http: httpx.AsyncClient | None = None
        self._wa: WhatsApp | None = None
        self.limits = _Limits(settings.pair_wait, settings.throughput_wait)
        hosts = (*MEDIA_HOSTS, *settings.media_hosts)
        self.media_hosts = MediaHosts(hosts) if resolve is None else MediaHosts(hosts, resolve)
        self.governor = Governor(
            "whatsapp",
            per_chat=RateLimit(*settings.chat_rate),
            global_=RateLimit(*settings.rate),
            max_attempts=settings.send_attempts,
            max_wait=settings.send_max_wait,
        )
        # read receipts and typing are not messages: their own pacing, never in a reply's way
        self.marks = Governor(
            "whatsapp",
            per_chat=None,
            global_=RateLimit(*settings.rate),
            max_attempts=2,
            max_wait=10.0,
        )

    @property
    def wa(self) -> WhatsApp:
        """pywa's client, made on first use (its httpx client lives on the running loop)."""
        if self._wa is None:
            transport: httpx.AsyncBaseTransport = httpx.AsyncHTTPTransport(retries=0)
            if self.settings.base_url:
                transport = _Rerouted(self.settings.base_url, transport)
            self._http = httpx.AsyncClient(transport=transport, timeout=30.0)
            kw: dict[str, Any] = {"api_version": self.settings.api_version} if self.settings.api_version else {}
            self._wa = WhatsApp(
                phone_id=self.settings.phone_number_id,
                token=self.settings.token.get_secret_value(),
                session=self._http,
                **kw,
            )
        return self._wa

    def report_to(self, hub: Any) -> None:
        self.governor.report_to(hub)
        self.governor.bot = self.settings.phone_number_id

    async def sign_in(self) -> Identity:
        """The number's details: the token and the number id work.

        Raises:
            WhatsAppStartError: the token or the number was refused, or Meta could not be reached.
        """
        try:
            number = await self.wa.get_business_phone_number()
        except WhatsAppError as e:
            if e.code in _AUTH_CODES or e.status_code == 401:
                raise WhatsAppStartError(
                    f"Meta refused the access token ({e.code}): set WHATSAPP_TOKEN to a system user's token "
                    "with the whatsapp_business_messaging permission"
                ) from e
            raise WhatsAppStartError(
                f"Meta refused phone number id {self.settings.phone_number_id} ({e.code} {e.message}): "
                "set WHATSAPP_PHONE_NUMBER_ID to the Phone Number ID of WhatsApp Manager > API Setup"
            ) from e
        except httpx.HTTPError as e:
            where = self.settings.base_url or f"https://{GRAPH_HOST}"
            raise WhatsAppStartError(f"cannot reach the Graph API at {where}: {type(e).__name__}: {e}") from e
        self.identity = Identity(
            phone_number_id=str(number.id),
            display_number=str(number.display_phone_number or ""),
            name=str(number.verified_name or ""),
        )
        return self.identity

    async def _call(self, governor: Governor, chat: str, request: Callable[[], Awaitable[T]]) -> T:
        async def once() -> T:
            try:
                result = await request()
            except (WhatsAppError, httpx.HTTPError) as e:
                raise mapped(e, self.limits) from e
            self.limits.reset()
            return result

        return await governor.send(chat, once)

    # --- messages -------------------------------------------------------------------------

    async def send_text(self, to: str, text: str, *, reply_to: str | None = None) -> str:
        """One text message (at most `MAX_LENGTH` characters); its ``wamid``."""

        async def once() -> str:
            sent = await self.wa.send_message(to=to, text=text, reply_to_message_id=reply_to, preview_url=False)
            return str(sent.id)

        return await self._call(self.governor, to, once)

    async def send_template(self, to: str, text: str) -> str:
        """``text`` in the configured template's one body parameter (outside the 24-hour window)."""
        settings = self.settings
        params = [{"type": "body", "parameters": [{"type": "text", "text": text}]}]

        async def once() -> str:
            sent = await self.wa.send_template(
                to=to,
                name=settings.template,
                language=TemplateLanguage(settings.template_language),
                params=params,
            )
            return str(sent.id)

        return await self._call(self.governor, to, once)

    async def send_file(self, to: str, file: MediaFile, *, caption: str = "") -> str:
        """A picture, an audio file or any other file as a document: uploaded to the media
        endpoint, then sent by its media id."""
        caption = caption[:CAPTION_LENGTH]

        async def once() -> str:
            media = await self.wa.upload_media(media=file.data, mime_type=file.mime, filename=file.name)
            media_id = str(media.id)
            if file.mime in IMAGE_TYPES and file.size <= IMAGE_MAX_BYTES:
                sent = await self.wa.send_image(to=to, image=media_id, caption=caption or None)
            elif file.mime in AUDIO_TYPES:
                sent = await self.wa.send_audio(to=to, audio=media_id)
            else:
                sent = await self.wa.send_document(
                    to=to, document=media_id, filename=file.name or "file", caption=caption or None
                )
            return str(sent.id)

        return await self._call(self.governor, to, once)

    async def send_voice(self, to: str, clip: AudioClip) -> str:
        """A spoken reply (OGG/Opus) as a voice message: uploaded, then sent as audio marked
        ``voice`` (WhatsApp shows it as a recorded voice note)."""

        async def once() -> str:
            media = await self.wa.upload_media(media=clip.data, mime_type="audio/ogg", filename=clip.name)
            sent = await self.wa.send_audio(to=to, audio=str(media.id), is_voice=True)
            return str(sent.id)

        return await self._call(self.governor, to, once)

    async def react(self, to: str, wamid: str, emoji: str) -> str:
        """A reaction (an emoji, or "" to remove the bot's) to the message ``wamid``."""

        async def once() -> str:
            sent = await self.wa.send_reaction(to=to, emoji=emoji, message_id=wamid)
            return str(sent.id)

        return await self._call(self.governor, to, once)

    async def mark_read(self, wamid: str, *, typing: bool = False) -> None:
        """Blue ticks on ``wamid``; with ``typing``, "typing..." too (Meta clears it after 25 s
        or at the answer). Best effort: a failure is logged, never the run's."""

        async def once() -> Any:
            if typing:
                return await self.wa.indicate_typing(message_id=wamid)
            return await self.wa.mark_message_as_read(message_id=wamid)

        await self._call(self.marks, wamid, once)

    # --- media in -------------------------------------------------------------------------

    async def fetch(self, part: MediaPart, max_bytes: int) -> bytes:
        """A media file's bytes: its URL from the Graph API, then the download with the token,
        at most ``max_bytes`` (capped while read), only from Meta's media hosts at public
        addresses, so a webhook cannot make the hub send its token elsewhere."""
        try:
            url = await self.wa.get_media_url(media_id=part.ref)
        except WhatsAppError as e:
            raise MediaError(f"the Graph API refused its media id ({e.code} {e.message})", name=part.name) from e
        except httpx.HTTPError as e:
            raise MediaError(f"the Graph API could not be reached for it: {e}", name=part.name) from e
        if url.file_size and url.file_size > max_bytes:
            raise MediaError(f"it is {url.file_size} bytes, over the limit of {max_bytes}", name=part.name)
        token = self.settings.token.get_secret_value()
        return await fetch_url(
            url.url,
            max_bytes=max_bytes,
            name=part.name,
            hosts=self.media_hosts,
            headers={"Authorization": f"Bearer {token}"},
        )

    async def close(self) -> None:
        http, self._http, self._wa = self._http, None, None
        if http is not None:
            await http.aclose()

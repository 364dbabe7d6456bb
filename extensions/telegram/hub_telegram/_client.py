"""The bot's connection: python-telegram-bot's ``Bot``, who it is, and everything outbound.

Outbound messages are split at 4096 UTF-16 units (code blocks whole), sent in order through
the [`Governor`][hub.platform.Governor] (per-chat and global pacing, ``retry_after`` honoured),
with PTB's errors mapped onto the governor's retry classes. Markup that Telegram refuses is
sent again as plain text. The token never reaches a log line.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import telegram
from telegram import ReplyParameters, User
from telegram.constants import ChatAction
from telegram.error import (
    BadRequest,
    ChatMigrated,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.request import HTTPXRequest

from hub import ExtensionError, MediaError, MediaFile, MediaPart, MediaRefused, MediaTooLarge
from hub.platform import (
    DEFAULT_ACCOUNT,
    AudioClip,
    Governor,
    PermanentSendError,
    RateLimit,
    RateLimited,
    SendFailed,
    TransientSendError,
    fetch_url,
    human_size,
    read_capped,
    split_message,
    utf16_len,
)

from ._settings import TelegramSettings

if TYPE_CHECKING:
    from hub import Hub

__all__ = [
    "TelegramClient",
    "MAX_MESSAGE_LENGTH",
    "MAX_CAPTION_LENGTH",
    "MAX_PHOTO_BYTES",
    "MAX_UPLOAD_BYTES",
    "MAX_DOWNLOAD_BYTES",
    "retry_after_seconds",
    "map_error",
]

log = logging.getLogger("hub_telegram")

MAX_MESSAGE_LENGTH = 4096  # UTF-16 code units, as Telegram counts
MAX_CAPTION_LENGTH = 1024  # a photo's or a document's caption
MAX_PHOTO_BYTES = 10_000_000  # sendPhoto; a larger picture goes as a document
MAX_UPLOAD_BYTES = 50_000_000  # sendDocument through the cloud Bot API
MAX_DOWNLOAD_BYTES = 20_000_000  # getFile through the cloud Bot API
_PHOTO_TYPES = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif", "image/bmp"})
_PARSE_ERROR = "can't parse entities"
VOICE_FORBIDDEN = "VOICE_MESSAGES_FORBIDDEN"
VOICE_RETRY = 3600.0
"""Seconds a chat that refused a voice message is not sent another (its user may allow them again)."""
"""What Telegram answers sendVoice when the user's privacy settings refuse voice messages."""
# Loggers that may print a URL (which holds the token): python-telegram-bot's and httpx's.
_URL_LOGGERS = ("httpx", "telegram", "telegram.Bot", "telegram.BaseRequest", "telegram.HTTPXRequest")


def retry_after_seconds(e: RetryAfter) -> float:
    """``RetryAfter.retry_after`` is an int or a timedelta depending on PTB's settings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PTB 22.2+ warns that the int form is deprecated
        value: Any = e.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


def map_error(e: TelegramError) -> Exception:
    """PTB's error → what the governor does with it (wait, retry, give up)."""
    if isinstance(e, RetryAfter):
        return RateLimited(retry_after_seconds(e), scope="chat", message=str(e))
    if isinstance(e, BadRequest):  # a NetworkError subclass: test it first
        return PermanentSendError(f"bad request: {e}")
    if isinstance(e, NetworkError):  # TimedOut, 5xx, refused connections
        return TransientSendError(f"{type(e).__name__}: {e}")
    return PermanentSendError(f"{type(e).__name__}: {e}")  # Forbidden, ChatMigrated, InvalidToken, ...


def _file_api_path(path: str) -> bool:
    """Whether ``path`` is a file API path as Telegram gives them (``photos/file_7.jpg``):
    relative, without ``..``, a scheme, a backslash or a control character."""
    if not path or path.startswith("/") or "://" in path or "\\" in path:
        return False
    if any(ord(c) < 0x20 or c == "\x7f" for c in path):
        return False
    return ".." not in PurePosixPath(path).parts


def _rate(per_second: float) -> RateLimit:
    """N per second as a sliding window: bursts up to N when N >= 1, else 1 per 1/N seconds."""
    count = max(1, int(per_second))
    return RateLimit(count, count / per_second)


class _Redact(logging.Filter):
    def __init__(self, secret: str) -> None:
        super().__init__()
        self.secret = secret

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the logging module's to report
            return True
        if self.secret in message:
            record.msg, record.args = message.replace(self.secret, "<token>"), ()
        return True


class TelegramClient:
    """Owns the PTB ``Bot`` from service start to stop; sends replies; shows "typing"."""

    def __init__(self, settings: TelegramSettings, *, account: str = DEFAULT_ACCOUNT) -> None:
        self.settings = settings
        self.account = account
        # what health, metrics and logs call this bot: "telegram", or "telegram/ACCOUNT"
        self.label = f"telegram/{account}" if account else "telegram"
        self.hub: Hub | None = None
        self._bot: telegram.Bot | None = None
        self._redact = _Redact(settings.token.get_secret_value())
        self.governor = Governor(
            self.label,
            per_chat=_rate(settings.chat_rate),
            global_=_rate(settings.global_rate),
            max_attempts=settings.send_attempts,
            max_wait=settings.send_max_wait,
        )
        # chats whose privacy settings refused a voice message, and when: not asked again for
        # VOICE_RETRY seconds (a reply a minute would otherwise cost a refused upload each)
        self._no_voice: dict[int, float] = {}

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def bot(self) -> telegram.Bot:
        if self._bot is None:
            raise ExtensionError(self.label, "the Telegram client is not started")
        return self._bot

    @property
    def me(self) -> User | None:
        """The bot's own user (from getMe), once known."""
        if self._bot is None:
            return None
        try:
            return self._bot.bot
        except RuntimeError:  # getMe has not succeeded yet
            return None

    async def start(self, hub: Hub) -> None:
        """Build the client and check the token (getMe). An unreachable API is retried later
        by the poller; a refused token is an error now.

        Raises:
            ExtensionError: Telegram refused the token.
        """
        self.hub = hub
        self.governor.report_to(hub)
        for name in _URL_LOGGERS:
            logging.getLogger(name).addFilter(self._redact)
        self._bot = telegram.Bot(
            self.settings.token.get_secret_value(),
            base_url=self.settings.resolved_base_url(),
            base_file_url=self.settings.resolved_base_file_url(),
            # replies to many chats at once; the long poll gets its own connection
            request=HTTPXRequest(connection_pool_size=32, read_timeout=15.0),
            get_updates_request=HTTPXRequest(connection_pool_size=1),
            local_mode=self.settings.local_mode,
        )
        try:
            await self.ensure_ready()
        except NetworkError as e:
            log.warning("telegram: the Bot API is not reachable yet (%s); retrying in the background", e)

    async def ensure_ready(self) -> User:
        """getMe, once: who the bot is (its id and @username decide what is a mention).

        Raises:
            ExtensionError: Telegram refused the token.
            NetworkError: the API could not be reached.
        """
        me = self.me
        if me is not None:
            return me
        try:
            await self.bot.initialize()
        except InvalidToken:
            # PTB's own message quotes the token: say it without.
            what = f"accounts.{self.account}.token" if self.account else "TELEGRAM_BOT_TOKEN"
            raise ExtensionError(self.label, f"Telegram refused the token (401/404): check {what}") from None
        me = self.bot.bot
        log.info("%s: signed in as @%s (id %s)", self.label, me.username, me.id)
        if self.settings.groups == "all" and me.can_read_all_group_messages is False:
            log.warning(
                'telegram: groups = "all" but the bot\'s privacy mode is on: in groups it only sees '
                "commands, mentions and replies. Turn it off with /setprivacy in @BotFather "
                "(then remove and re-add the bot to each group), or make the bot an admin."
            )
        return me

    async def stop(self) -> None:
        bot, self._bot = self._bot, None
        try:
            if bot is not None:
                await bot.shutdown()
        finally:
            for name in _URL_LOGGERS:
                logging.getLogger(name).removeFilter(self._redact)

    # --- sending -------------------------------------------------------------------------

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        reply_to: int | None = None,
        on_part: Callable[[int, int], Awaitable[None]] | None = None,
    ) -> list[int]:
        """Send ``text`` in parts of at most 4096, in order; the first part replies to
        ``reply_to``. ``on_part(index, message_id)`` is awaited after each part went out (the
        output handler records it, so a restart never sends it again). Returns the message ids.

        Raises:
            SendFailed: a part was given up on (the message says which parts went out).
        """
        parts = split_message(text, MAX_MESSAGE_LENGTH, length=utf16_len)
        sent: list[int] = []
        for i, part in enumerate(parts):
            quote = reply_to if i == 0 else None
            try:
                message = await self.governor.send(chat_id, self._sender(chat_id, part, quote))
            except SendFailed as e:
                if not sent:
                    raise
                raise SendFailed(
                    "telegram",
                    chat_id,
                    f"part {i + 1} of {len(parts)} failed after {len(sent)} sent (message ids {sent}): {e.reason}",
                ) from e
            sent.append(message.message_id)
            if on_part is not None:
                await on_part(i, message.message_id)
        return sent

    # --- live replies: one message, edited in place -------------------------------------

    async def send_one(self, chat_id: int, text: str, *, reply_to: int | None = None) -> int:
        """Send one message (``text`` fits the limit); returns its id. Raises SendFailed."""
        message = await self.governor.send(chat_id, self._sender(chat_id, text, reply_to))
        return message.message_id

    async def edit_text(self, chat_id: int, message_id: int, text: str, *, markup: bool = True) -> bool:
        """Show ``text`` in message ``message_id``, paced like a send, with the same plain-text
        fallback for refused markup; ``markup=False`` edits as plain text at once. Returns
        whether the text was shown with its markup. Raises SendFailed (a message deleted,
        too old, ...)."""
        mode = (self.settings.parse_mode or None) if markup else None

        async def attempt() -> None:
            nonlocal mode
            for _ in range(2):  # at most: the markup refused, then plain
                try:
                    await self.bot.edit_message_text(text, chat_id=chat_id, message_id=message_id, parse_mode=mode)
                    return
                except BadRequest as e:
                    if "message is not modified" in str(e).lower():
                        return  # it shows this text already (an edit retried after a timeout)
                    if mode is None or _PARSE_ERROR not in str(e).lower():
                        raise map_error(e) from e
                    # routine while a live reply is half-written (an unclosed tag): not a warning
                    log.debug("telegram: chat %s refused the %s markup (%s); editing as plain text", chat_id, mode, e)
                    mode = None
                except TelegramError as e:
                    raise map_error(e) from e

        await self.governor.send(chat_id, attempt)
        return mode is not None

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        """Delete one of the bot's messages. Raises SendFailed."""

        async def attempt() -> None:
            try:
                await self.bot.delete_message(chat_id=chat_id, message_id=message_id)
            except TelegramError as e:
                raise map_error(e) from e

        await self.governor.send(chat_id, attempt)

    def _sender(self, chat_id: int, text: str, reply_to: int | None) -> Callable[[], Awaitable[telegram.Message]]:
        mode = self.settings.parse_mode or None
        reply = ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) if reply_to else None

        target = chat_id

        async def attempt() -> telegram.Message:
            nonlocal mode, target
            for _ in range(3):  # at most: the markup refused, then the group upgraded
                try:
                    return await self.bot.send_message(
                        chat_id=target, text=text, parse_mode=mode, reply_parameters=reply
                    )
                except BadRequest as e:
                    if mode is None or _PARSE_ERROR not in str(e).lower():
                        raise map_error(e) from e
                    log.warning(
                        "telegram: chat %s refused the %s markup (%s); sending it as plain text", chat_id, mode, e
                    )
                    mode = None  # for this part's retries too
                except ChatMigrated as e:
                    log.warning("telegram: group %s became supergroup %s; sending there", target, e.new_chat_id)
                    target = e.new_chat_id
                except TelegramError as e:
                    raise map_error(e) from e
            raise PermanentSendError(f"chat {chat_id}: gave up after the markup fallback and a chat migration")

        return attempt

    # --- files ---------------------------------------------------------------------------

    async def fetch(self, part: MediaPart, max_bytes: int) -> bytes:
        """The bytes of a file a message carried (``getFile``, then its download), in memory.

        The download is ours, not python-telegram-bot's, which reads any ``file_path`` that
        exists on the local disk: the path comes from the Bot API server, which is not trusted
        with the disk. It is fetched over HTTP from the file API, streamed under ``max_bytes``
        whatever size ``getFile`` claimed; only with ``local_mode = true`` is an absolute path
        read from the disk (a local Bot API server's own files), capped as well.

        Raises:
            MediaTooLarge: over ``max_bytes`` (told by getFile, before any download, or found
                while reading), or over the 20 MB the Bot API serves to bots.
            MediaRefused: a file path that is neither the file API's nor, in local mode, a local one.
            MediaError: Telegram refused or could not be reached.
        """
        name = part.name
        try:
            file = await self.bot.get_file(part.ref)
        except BadRequest as e:
            if "too big" in str(e).lower():
                raise MediaTooLarge(
                    f"Telegram gives bots files of at most {human_size(MAX_DOWNLOAD_BYTES)}", name=name
                ) from e
            raise MediaError(f"Telegram refused it ({e})", name=name) from e
        except TelegramError as e:
            raise MediaError(f"it could not be fetched from Telegram ({type(e).__name__}: {e})", name=name) from e
        if file.file_size is not None and file.file_size > max_bytes:
            raise MediaTooLarge(
                f"it is {human_size(file.file_size)}, over the {human_size(max_bytes)} limit per file", name=name
            )
        # PTB prefixes the file API's URL unless the path exists on this disk: take it off again
        files = self.bot.base_file_url + "/"
        given = file.file_path or ""
        path = given[len(files) :] if given.startswith(files) else given
        if self.settings.local_mode and PurePosixPath(path).is_absolute():
            return await asyncio.to_thread(read_capped, path, max_bytes=max_bytes, name=name)
        if not _file_api_path(path):
            raise MediaRefused(
                "Telegram named it by a path outside its file API, which is not read"
                + ("" if self.settings.local_mode else " (a local Bot API server needs local_mode = true)"),
                name=name,
            )
        return await fetch_url(files + quote(path), max_bytes=max_bytes, name=name)

    async def send_file(
        self,
        chat_id: int,
        file: MediaFile,
        caption: str,
        *,
        as_photo: bool,
        reply_to: int | None = None,
        on_part: Callable[[int, int], Awaitable[None]] | None = None,
    ) -> list[int]:
        """Send a picture (``sendPhoto``) or any file (``sendDocument``) with ``caption``.

        A caption over 1024 goes after the file as text (split like any message); a picture
        over Telegram's 10 MB for photos, or of a type it does not show as a photo, goes as
        a document. Returns the message ids, the file's first.

        Raises:
            SendFailed: Telegram refused it, or gave up after retries.
        """
        if file.size > MAX_UPLOAD_BYTES:
            raise SendFailed(
                "telegram",
                chat_id,
                f"{file.name} is {human_size(file.size)}, over the "
                f"{human_size(MAX_UPLOAD_BYTES)} Telegram takes from bots",
            )
        photo = as_photo and file.mime in _PHOTO_TYPES and file.size <= MAX_PHOTO_BYTES
        fits = utf16_len(caption) <= MAX_CAPTION_LENGTH
        mode = self.settings.parse_mode or None
        reply = ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) if reply_to else None

        async def attempt() -> telegram.Message:
            upload = telegram.InputFile(file.data, filename=file.name)
            kw: dict[str, Any] = {
                "chat_id": chat_id,
                "caption": caption if fits and caption else None,
                "parse_mode": mode if fits and caption else None,
                "reply_parameters": reply,
            }
            try:
                if photo:
                    return await self.bot.send_photo(photo=upload, **kw)
                return await self.bot.send_document(document=upload, **kw)
            except TelegramError as e:
                raise map_error(e) from e

        message = await self.governor.send(chat_id, attempt)
        ids = [message.message_id]
        if on_part is not None:
            await on_part(0, message.message_id)
        if caption and not fits:

            async def later(i: int, message_id: int) -> None:
                if on_part is not None:
                    await on_part(i + 1, message_id)

            ids += await self.send_text(chat_id, caption, on_part=later)
        return ids

    async def send_voice(self, chat_id: int, clip: AudioClip, *, reply_to: int | None = None) -> int | None:
        """Send ``clip`` (OGG/Opus) as a voice message; its message id, or None when the
        user's privacy settings refuse voice messages (``VOICE_MESSAGES_FORBIDDEN``: the
        reply's text, sent already, is what they get); such a chat is not sent another for
        `VOICE_RETRY` seconds.

        Raises:
            SendFailed: Telegram refused it otherwise, or gave up after retries.
        """
        refused = self._no_voice.get(chat_id)
        if refused is not None:
            if time.monotonic() - refused < VOICE_RETRY:
                return None
            del self._no_voice[chat_id]
        reply = ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) if reply_to else None

        async def attempt() -> telegram.Message:
            upload = telegram.InputFile(clip.data, filename=clip.name)
            try:
                return await self.bot.send_voice(
                    chat_id=chat_id, voice=upload, duration=max(1, round(clip.seconds)), reply_parameters=reply
                )
            except TelegramError as e:
                raise map_error(e) from e

        try:
            message = await self.governor.send(chat_id, attempt)
        except SendFailed as e:
            if VOICE_FORBIDDEN.lower() in str(e).lower():  # python-telegram-bot rewrites its case
                log.info("telegram: chat %s refuses voice messages: the reply stays text", chat_id)
                self._no_voice[chat_id] = time.monotonic()
                return None
            raise
        return message.message_id

    async def typing(self, chat_id: int) -> None:
        """Show "typing..." (Telegram shows it for 5 s or until a message arrives). Best effort."""
        try:
            await self.bot.send_chat_action(chat_id=chat_id, action=ChatAction.TYPING)
        except (TelegramError, ExtensionError) as e:
            log.debug("telegram: typing in chat %s failed: %s", chat_id, e)

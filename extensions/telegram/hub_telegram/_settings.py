"""``[extensions.telegram]``: every key with a default that works, except the token."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator

from hub.platform import PlatformSettings

__all__ = ["TelegramSettings", "DEFAULT_BASE_URL", "DEFAULT_BASE_FILE_URL"]

DEFAULT_BASE_URL = "https://api.telegram.org/bot"
DEFAULT_BASE_FILE_URL = "https://api.telegram.org/file/bot"


class TelegramSettings(PlatformSettings):
    """Settings of the Telegram extension (validated by the loader; unknown keys are errors).

    ``allowed_users``, ``loop_guard_*`` and ``send_*`` are every platform's
    (:class:`hub.platform.PlatformSettings`).
    """

    token: SecretStr
    """The bot's token from @BotFather, from the environment: ``token = "${TELEGRAM_BOT_TOKEN}"``."""
    base_url: str = ""
    """Bot API root as python-telegram-bot takes it ("": https://api.telegram.org/bot)."""
    base_file_url: str = ""
    """File API root ("": derived from base_url, or https://api.telegram.org/file/bot)."""
    poll_timeout: int = Field(30, ge=1, le=50)
    """Seconds one getUpdates long poll may wait for news."""
    allowed_chats: list[int | str] = Field(default_factory=list)
    """Chat ids (or @usernames of public chats) the bot answers in; empty: every chat."""
    groups: Literal["mention", "all", "off"] = "mention"
    """In groups: answer when mentioned or replied to, answer every message, or never."""
    answer_bots: bool = False
    """Answer messages from other bots (the loop guard still applies)."""
    parse_mode: Literal["", "HTML", "MarkdownV2", "Markdown"] = ""
    """Formatting of replies ("": plain text). Markup Telegram rejects is sent as plain text."""
    reply_in_groups: bool = True
    """In groups, the first message of a reply quotes the message it answers."""
    typing: bool = True
    """Show "typing..." while a run for the chat is in progress."""
    chat_rate: float = Field(1.0, gt=0)
    """Messages per second to one chat (Telegram: about 1; 20 a minute in groups)."""
    global_rate: float = Field(30.0, gt=0)
    """Messages per second overall (Telegram: about 30)."""
    live: bool = False
    """Edit one message in place while the model writes the reply (then the final text)."""
    live_interval: float = Field(1.0, ge=0.1, le=60)
    """Seconds between edits of a live reply (Telegram allows about one a second per chat)."""

    @field_validator("token")
    @classmethod
    def _token_present(cls, v: SecretStr) -> SecretStr:
        if not v.get_secret_value().strip():
            raise ValueError(
                "is empty: set the TELEGRAM_BOT_TOKEN environment variable "
                '(the config reads token = "${TELEGRAM_BOT_TOKEN}")'
            )
        return v

    def resolved_base_url(self) -> str:
        return self.base_url or DEFAULT_BASE_URL

    def resolved_base_file_url(self) -> str:
        if self.base_file_url:
            return self.base_file_url
        if self.base_url.endswith("/bot"):  # a local Bot API server serves files beside it
            return self.base_url[: -len("/bot")] + "/file/bot"
        return DEFAULT_BASE_FILE_URL

"""``[extensions.telegram]``: every key with a default that works, except the token."""

from __future__ import annotations

import re
from typing import Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator

from hub.platform import MIN_SECRET_LENGTH, PlatformSettings, check_secret_length

__all__ = ["TelegramSettings", "DEFAULT_BASE_URL", "DEFAULT_BASE_FILE_URL"]

DEFAULT_BASE_URL = "https://api.telegram.org/bot"
DEFAULT_BASE_FILE_URL = "https://api.telegram.org/file/bot"
_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")


class TelegramSettings(PlatformSettings):
    """Settings of the Telegram extension (validated by the loader; unknown keys are errors).

    ``allowed_users``, ``loop_guard_*`` and ``send_*`` are every platform's
    ([`hub.platform.PlatformSettings`][hub.platform.PlatformSettings]).
    """

    shared_by_accounts = ("live", "parse_mode")  # one output (live or whole) and one prompt serve every account

    token: SecretStr
    """The bot's token from @BotFather, from the environment: ``token = "${TELEGRAM_BOT_TOKEN}"``."""
    base_url: str = ""
    """Bot API root as python-telegram-bot takes it ("": https://api.telegram.org/bot)."""
    base_file_url: str = ""
    """File API root ("": derived from base_url, or https://api.telegram.org/file/bot)."""
    local_mode: bool = False
    """True only with a local Bot API server (``telegram-bot-api --local``) that names files by
    their path on its disk: they are read from there. Otherwise every file is fetched over
    HTTP from the file API, and a file path that is not one of its relative paths is refused."""
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
    lease_ttl: float = Field(30.0, ge=1, le=3600)
    """Seconds a worker's lease (on polling, on setWebhook) lasts unrenewed: how long a dead
    worker's poller stays unowned before another worker sharing the store takes over."""
    webhook_url: str = ""
    """"": long polling (one worker polls, under a lease). Set: webhook mode: Telegram POSTs
    updates to this public URL, which reaches the hub's ``[http]`` endpoint at the URL's path
    (every worker answers them; one calls setWebhook)."""
    webhook_secret: SecretStr = Field(SecretStr(""), validate_default=True)
    """Telegram sends it in ``X-Telegram-Bot-Api-Secret-Token``; requests without it get 401.
    16-256 of A-Z a-z 0-9 _ - (``openssl rand -hex 32``); required in webhook mode:
    ``"${TELEGRAM_WEBHOOK_SECRET}"``."""

    @field_validator("token")
    @classmethod
    def _token_present(cls, v: SecretStr) -> SecretStr:
        if not v.get_secret_value().strip():
            raise ValueError(
                "is empty: set the TELEGRAM_BOT_TOKEN environment variable "
                '(the config reads token = "${TELEGRAM_BOT_TOKEN}")'
            )
        return v

    @field_validator("webhook_url")
    @classmethod
    def _webhook_url(cls, v: str) -> str:
        v = v.strip()
        if not v:
            return v
        parts = urlsplit(v)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f'must be an https:// URL Telegram can reach (or "" to poll), not {v!r}')
        if parts.path in ("", "/"):
            raise ValueError(f"needs a path for the hub to serve it at, e.g. https://{parts.netloc}/telegram")
        if parts.query or parts.fragment:
            raise ValueError("must not have a query or a fragment: the hub serves it by its path")
        return v

    @field_validator("webhook_secret")
    @classmethod
    def _webhook_secret(cls, v: SecretStr, info: ValidationInfo) -> SecretStr:
        secret = v.get_secret_value()
        if info.data.get("webhook_url") and not secret:
            raise ValueError(
                "is empty but webhook_url is set: set the TELEGRAM_WEBHOOK_SECRET environment "
                'variable (webhook_secret = "${TELEGRAM_WEBHOOK_SECRET}"): without it anyone could post updates'
            )
        if secret and not _SECRET.fullmatch(secret):
            raise ValueError(
                f"must be {MIN_SECRET_LENGTH} to 256 of the characters A-Z a-z 0-9 _ - (Telegram allows these)"
            )
        if secret:
            check_secret_length(secret)  # a short one is found by trying: anyone could post updates
        return v

    @model_validator(mode="after")
    def _accounts_apart(self) -> Self:
        """Each account is its own bot (its own token: leases and offsets are per bot) and,
        in webhook mode, has its own path on the endpoint."""
        bots: dict[str, str] = {}
        paths: dict[str, str] = {}
        for name, account in self.every_account():
            where = f"accounts.{name}" if name else "the platform table"
            if (other := bots.setdefault(account.bot_id(), where)) != where:
                raise ValueError(f"accounts.{name}.token: the same bot as {other}: give each account its own token")
            if account.webhook_url and (other := paths.setdefault(account.webhook_path(), where)) != where:
                raise ValueError(
                    f"accounts.{name}.webhook_url: the same path as {other}: give each account its own webhook_url"
                )
        return self

    def webhook_path(self) -> str:
        """The path of ``webhook_url``: where the hub serves Telegram's POSTs."""
        return urlsplit(self.webhook_url).path

    def bot_id(self) -> str:
        """The bot's id, the token's first part (names its leases without asking Telegram)."""
        return self.token.get_secret_value().partition(":")[0]

    def resolved_base_url(self) -> str:
        return self.base_url or DEFAULT_BASE_URL

    def resolved_base_file_url(self) -> str:
        if self.base_file_url:
            return self.base_file_url
        if self.base_url.endswith("/bot"):  # a local Bot API server serves files beside it
            return self.base_url[: -len("/bot")] + "/file/bot"
        return DEFAULT_BASE_FILE_URL

"""Mastodon: mentions in, replies (and threads) out, through Mastodon.py on the public client API.

Context: ``mastodon:thread`` (one per thread, keyed by the status id of its first post; a
mention starts or joins it; plain-text replies go to ``mastodon:reply``). Output:
``mastodon:reply`` answers the mention the run is handling (from the input's metadata).
Input: ``mastodon:mention``, from the streaming API, with the notifications read by id at
start, after a disconnect and every ``poll_interval`` seconds.

``dry_run`` (on by default) logs what would be posted; ``review`` holds each reply for an
operator (``hub review``); both, and the caps, are every public timeline's
([`hub.platform.PublicSettings`][hub.platform.PublicSettings]).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator
from yarl import URL

from hub import ConfigError, Extension
from hub.platform import PublicSettings, timeline_extension

from ._bot import PLATFORM, SINCE_ID_KEY, MastodonBot, make_client, more_private
from ._text import split_status, status_length

__all__ = [
    "MastodonSettings",
    "MastodonBot",
    "extension",
    "make_client",
    "more_private",
    "split_status",
    "status_length",
    "SINCE_ID_KEY",
    "PLATFORM",
]


class MastodonSettings(PublicSettings):
    """``[extensions.mastodon]``. The access token is a ``SecretStr``: it never shows in a log."""

    timeline_name = "Mastodon"

    base_url: str = ""
    """The instance, ``https://mastodon.example`` (tests point it at a loopback fake)."""
    access_token: SecretStr = SecretStr("")
    """The bot account's token (Preferences > Development > New application; scopes read, write)."""
    visibility: Literal["public", "unlisted", "private", "direct"] = "unlisted"
    """Of the bot's replies; never more public than the mention answered."""
    stream: bool = True
    """Mentions from the streaming API (notifications are still read by id as a fallback)."""
    poll_interval: float = Field(60.0, ge=5)
    """Seconds between reads of the notifications (at most 15 while the stream is down)."""
    request_timeout: float = Field(30.0, gt=0)
    """Seconds one request to the instance may take."""

    @field_validator("base_url")
    @classmethod
    def _absolute_url(cls, v: str) -> str:
        if v and not (v.startswith(("http://", "https://")) and URL(v).host):
            raise ValueError(f"{v!r} is not an absolute http(s) URL (https://mastodon.social, say)")
        return v.rstrip("/")

    def check(self) -> None:
        """Raise ConfigError naming the key that is missing.

        Raises:
            ConfigError: ``base_url`` or ``access_token`` is empty.
        """
        if not self.base_url:
            raise ConfigError(
                "is empty; the bot's instance is needed (https://mastodon.social, say)",
                key="extensions.mastodon.base_url",
            )
        if not self.access_token.get_secret_value():
            raise ConfigError(
                'is empty; set MASTODON_ACCESS_TOKEN in the environment (access_token = "${MASTODON_ACCESS_TOKEN}")',
                key="extensions.mastodon.access_token",
            )


_INSTRUCTIONS = (
    "You are answering on Mastodon. The input is a public post that mentions you. Reply briefly "
    "in plain text (no Markdown): one status is about 500 characters; longer text becomes a thread."
)


def extension(
    settings: MastodonSettings,
    *,
    client_factory: Callable[[MastodonSettings], Any] | None = None,
    bot: MastodonBot | None = None,
) -> Extension:
    """The Mastodon extension; ``bot`` lets a caller keep a handle on the running bot (``poll()``).

    Raises:
        ConfigError: ``base_url`` or ``access_token`` is missing.
    """
    settings.check()
    return timeline_extension(
        PLATFORM,
        bot,
        settings=settings,
        make_bot=MastodonBot,
        client_factory=client_factory,
        loggers=("mastodon",),
        thread="A thread on Mastodon, keyed by the status id of its first post; mentions come in here.",
        instructions=_INSTRUCTIONS,
        reply="Reply on Mastodon to the post you are answering (long text becomes a thread).",
        mentions="Posts that mention the bot, from the streaming API and the notifications.",
        description="Mastodon: answers mentions.",
    )

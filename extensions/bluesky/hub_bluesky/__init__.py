"""Bluesky: mentions and replies in, replies (and threads) out, through the atproto SDK.

Context: ``bluesky:thread`` (one per thread, keyed by the at:// uri of its root post).
Output: ``bluesky:reply`` answers the post the run is handling, with ``reply {root, parent}``
references. Input: ``bluesky:mention``, ``listNotifications`` read every ``poll_interval``
seconds (the first at start).

``dry_run`` (on by default) logs what would be posted; ``review`` holds each reply for an
operator (``hub review``); both, and the caps, are every public timeline's
([`hub.platform.PublicSettings`][hub.platform.PublicSettings]).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import Field, SecretStr, field_validator

from hub import ConfigError, Extension
from hub.platform import PublicSettings, timeline_extension

from ._bot import CURSOR_KEY, MAX_GRAPHEMES, PLATFORM, BlueskyBot, SessionRevoked, build_text, make_client, split_post

__all__ = [
    "BlueskySettings",
    "BlueskyBot",
    "SessionRevoked",
    "extension",
    "make_client",
    "build_text",
    "split_post",
    "CURSOR_KEY",
    "MAX_GRAPHEMES",
    "PLATFORM",
]


class BlueskySettings(PublicSettings):
    """``[extensions.bluesky]``. The app password is a ``SecretStr``: it never shows in a log."""

    timeline_name = "Bluesky"

    handle: str = ""
    """The bot's handle (``hub.bsky.social``)."""
    app_password: SecretStr = SecretStr("")
    """An app password of the account (Settings > Privacy and security > App passwords)."""
    base_url: str = ""
    """The PDS (``/xrpc`` is added); empty: https://bsky.social (tests point it at a fake)."""
    poll_interval: float = Field(30.0, ge=5)
    """Seconds between reads of the notifications; the first is at start."""

    @field_validator("base_url")
    @classmethod
    def _absolute_url(cls, v: str) -> str:
        if v and not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not an absolute http(s) URL (https://bsky.social, say)")
        return v

    def check(self) -> None:
        """Raise ConfigError naming the key that is missing.

        Raises:
            ConfigError: ``handle`` or ``app_password`` is empty.
        """
        if not self.handle:
            raise ConfigError(
                "is empty; the bot's handle is needed (hub.bsky.social, say)", key="extensions.bluesky.handle"
            )
        if not self.app_password.get_secret_value():
            raise ConfigError(
                'is empty; set BLUESKY_APP_PASSWORD in the environment (app_password = "${BLUESKY_APP_PASSWORD}")',
                key="extensions.bluesky.app_password",
            )


_INSTRUCTIONS = (
    "You are answering on Bluesky. The input is a public post that mentions or replies to you. "
    "Reply briefly in plain text (no Markdown): one post is 300 characters; longer text becomes a thread."
)


def extension(
    settings: BlueskySettings,
    *,
    client_factory: Callable[[BlueskySettings], Any] | None = None,
    bot: BlueskyBot | None = None,
) -> Extension:
    """The Bluesky extension; ``bot`` lets a caller keep a handle on the running bot (``poll()``).

    Raises:
        ConfigError: ``handle`` or ``app_password`` is missing.
    """
    settings.check()
    return timeline_extension(
        PLATFORM,
        bot,
        settings=settings,
        make_bot=BlueskyBot,
        client_factory=client_factory,
        loggers=("atproto", "atproto_client", "httpx"),
        thread="A thread on Bluesky, keyed by the at:// uri of its root post; mentions come in here.",
        instructions=_INSTRUCTIONS,
        reply="Reply on Bluesky to the post you are answering (long text becomes a thread).",
        mentions="Posts that mention or reply to the bot, from listNotifications.",
        description="Bluesky: answers mentions and replies.",
    )

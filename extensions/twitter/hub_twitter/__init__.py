"""X (Twitter): mentions in, replies and posts out, through tweepy's ``AsyncClient``.

Contexts: ``twitter:conversation`` (one per conversation id; a mention starts or joins
it; plain-text replies go to ``twitter:reply``) and ``twitter:timeline`` (the bot's own
timeline, key ``home``, for schedules; plain text goes to ``twitter:post``).
Outputs: ``twitter:reply`` answers the mention the run is handling (from the input's
metadata, never from a model-chosen attribute); ``twitter:post`` posts on the timeline.
Input: ``twitter:mention``, a poll every ``poll_interval`` seconds, the first at start.
``dry_run`` (on by default) logs what would be posted instead of posting it; ``review``
holds each post for an operator (``hub review``); both, and the caps, are every public
timeline's ([`hub.platform`][hub.platform]'s ``PublicSettings``).

Credentials come from the environment through ``${VAR}`` in config.toml. Reading needs
``bearer_token``, or else the four OAuth 1.0a keys; posting (``dry_run = false``) needs
the four OAuth 1.0a keys; without them, ``user_id`` names the bot's account.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, SecretStr, field_validator
from tweepy.asynchronous import AsyncClient
from yarl import URL

from hub import ConfigError, Context, Extension, Input, Service, TextArgs, output
from hub.platform import PublicSettings, Resolve, host_name, quiet_loggers

from ._bot import MEDIA_HOSTS, POSTS_KEY, SINCE_ID_KEY, TwitterBot
from ._client import RateLimitState, TwitterClient, make_client
from ._text import MAX_TWEET, split_tweets, weighted_len

__all__ = [
    "TwitterSettings",
    "TwitterBot",
    "TwitterClient",
    "RateLimitState",
    "extension",
    "make_client",
    "weighted_len",
    "split_tweets",
    "MAX_TWEET",
    "SINCE_ID_KEY",
    "POSTS_KEY",
    "MEDIA_HOSTS",
    "ENV_VARS",
    "MIN_POLL_INTERVAL",
]

MIN_POLL_INTERVAL = 15.0
POSTING_KEYS = ("api_key", "api_secret", "access_token", "access_token_secret")
ENV_VARS = {
    "bearer_token": "TWITTER_BEARER_TOKEN",
    "api_key": "TWITTER_API_KEY",
    "api_secret": "TWITTER_API_SECRET",
    "access_token": "TWITTER_ACCESS_TOKEN",
    "access_token_secret": "TWITTER_ACCESS_TOKEN_SECRET",
}


class TwitterSettings(PublicSettings):
    """``[extensions.twitter]``. Secrets are ``SecretStr``: they never show in a repr or a log.

    ``allowed_users`` (numeric ids or usernames), ``loop_guard_*`` (answers per
    conversation) and ``send_*`` are every platform's
    ([`hub.platform.PlatformSettings`][hub.platform.PlatformSettings]); ``dry_run``, ``review``,
    ``max_posts_per_day`` and ``replies_per_account`` every public timeline's
    ([`hub.platform.PublicSettings`][hub.platform.PublicSettings]).
    """

    timeline_name = "X"

    bearer_token: SecretStr = SecretStr("")
    """Reads mentions (app-only OAuth 2.0 bearer token)."""
    api_key: SecretStr = SecretStr("")
    """OAuth 1.0a consumer key: with the three below, posts as the bot's account."""
    api_secret: SecretStr = SecretStr("")
    """OAuth 1.0a consumer secret (the API Key's secret)."""
    access_token: SecretStr = SecretStr("")
    """OAuth 1.0a access token of the bot's account (it starts with the account's numeric id)."""
    access_token_secret: SecretStr = SecretStr("")
    """OAuth 1.0a access token secret of the bot's account."""
    poll_interval: float = 90.0
    """Seconds between mention polls; the first poll is at start. At least 15."""
    user_id: str = ""
    """The bot account's numeric id. Asked of X at start when the OAuth 1.0a keys are set;
    needed when they are not (a dry run reading with the bearer token only)."""
    api_base_url: str = ""
    """Another host for X's API (a proxy); empty: https://api.twitter.com."""
    media_hosts: list[str] = Field(default_factory=list)
    """Hosts added to `MEDIA_HOSTS` that a mention's pictures may be fetched from (a
    host, or any host under it); pictures come only from them, and only at public addresses."""

    @field_validator("media_hosts")
    @classmethod
    def _media_hosts(cls, v: list[str]) -> list[str]:
        return [host_name(h) for h in v]

    @field_validator("poll_interval")
    @classmethod
    def _poll_floor(cls, v: float) -> float:
        if v < MIN_POLL_INTERVAL:
            raise ValueError(
                f"must be at least {MIN_POLL_INTERVAL:g} seconds: X allows about 10 mention reads "
                "per 15 minutes on the Basic tier (90 is a safe default)"
            )
        return v

    @field_validator("api_base_url")
    @classmethod
    def _absolute_url(cls, v: str) -> str:
        if v and not (v.startswith(("http://", "https://")) and URL(v).host):
            raise ValueError(f"{v!r} is not an absolute http(s) URL (https://x-proxy.example.com, say)")
        return v

    @property
    def has_posting_keys(self) -> bool:
        return all(getattr(self, k).get_secret_value() for k in POSTING_KEYS)

    def check_credentials(self) -> None:
        """Raise ConfigError naming the key (and its environment variable) that is missing.

        Raises:
            ConfigError: a credential the chosen mode needs is empty.
        """

        def missing(key: str, why: str) -> ConfigError:
            return ConfigError(
                f'is empty; {why}: set {ENV_VARS[key]} in the environment ({key} = "${{{ENV_VARS[key]}}}")',
                key=f"extensions.twitter.{key}",
            )

        posting = {k: bool(getattr(self, k).get_secret_value()) for k in POSTING_KEYS}
        absent = [k for k, present in posting.items() if not present]
        if not self.dry_run and absent:
            raise missing(absent[0], "posting (dry_run = false) needs all four OAuth 1.0a keys")
        if any(posting.values()) and absent:
            raise missing(absent[0], "the OAuth 1.0a keys work only together")
        if not self.bearer_token.get_secret_value() and absent:
            raise missing("bearer_token", "reading mentions needs the bearer token (or the four OAuth 1.0a keys)")
        if absent and not self.user_id.strip():
            raise ConfigError(
                "is empty; without the OAuth 1.0a keys the bot's numeric account id must be given",
                key="extensions.twitter.user_id",
            )


_CONVERSATION_INSTRUCTIONS = (
    "You are answering on X (Twitter). The input is a post that mentions you. Reply briefly: "
    "one post is 280 characters (links count 23, CJK characters 2); longer text becomes a thread."
)
_TIMELINE_INSTRUCTIONS = (
    "You are writing a post for your own X (Twitter) timeline. Keep it within 280 characters "
    "when you can; longer text becomes a thread."
)


class PostAttributes(BaseModel):
    """``twitter:post``'s and ``twitter:reply``'s attribute: pictures for the first post."""

    media: str = Field(
        "",
        description="pictures to add, comma-separated (at most 4): media handles from "
        "action results (media:1) or https URLs on [media] url_hosts",
    )


def extension(
    settings: TwitterSettings,
    *,
    client_factory: Callable[[TwitterSettings], AsyncClient] | None = None,
    bot: TwitterBot | None = None,
    resolve: Resolve | None = None,
) -> Extension:
    """The X extension. ``client_factory`` builds the tweepy client (tests route it to a
    fake); ``bot`` lets a caller keep a handle on the running bot (``poll()``); ``resolve``
    finds the addresses of media hosts (default: the system's resolver, public addresses
    only; tests route their fake's names to it).

    Raises:
        ConfigError: a credential is missing for the chosen mode.
    """
    quiet_loggers("tweepy")
    settings.check_credentials()
    if bot is not None and (client_factory is not None or resolve is not None or bot.settings is not settings):
        raise ValueError("a given bot brings its own settings, client_factory and resolve")
    x = bot or TwitterBot(settings, client_factory=client_factory, resolve=resolve)

    conversation: Context[TextArgs, dict[str, Any]] = Context(
        type="twitter:conversation",
        schema=TextArgs,
        description="A conversation on X, keyed by its conversation id; mentions of the bot come in here.",
        instructions=_CONVERSATION_INSTRUCTIONS,
        reply_output="twitter:reply",
    )
    timeline: Context[TextArgs, dict[str, Any]] = Context(
        type="twitter:timeline",
        schema=TextArgs,
        description="The bot's own X timeline (key: home), for scheduled or requested posts.",
        instructions=_TIMELINE_INSTRUCTIONS,
        reply_output="twitter:post",
    )

    @output(
        type="twitter:reply",
        context="twitter:conversation",
        attributes=PostAttributes,
        description="Reply on X to the post you are answering (long text becomes a thread).",
    )
    async def reply(content: str, ctx: Any) -> dict[str, Any]:
        return await x.reply(content, ctx)

    @output(
        type="twitter:post",
        context="twitter:timeline",
        attributes=PostAttributes,
        description="Publish a new post on your X timeline (long text becomes a thread).",
        instructions='media="media:1" adds pictures an action returned (at most 4) to the first post.',
    )
    async def post(content: str, ctx: Any) -> dict[str, Any]:
        return await x.post(content, ctx)

    return Extension(
        name="twitter",
        contexts=[conversation, timeline],
        outputs=[reply, post],
        inputs=[
            Input(
                type="twitter:mention",
                subscribe=x.subscribe,
                fetch=x.fetch,
                description="Posts that mention the bot, polled every poll_interval seconds.",
            )
        ],
        services=[Service(name="twitter", start=x.start, stop=x.stop)],
        description="X (Twitter): answers mentions, posts to the timeline.",
    )

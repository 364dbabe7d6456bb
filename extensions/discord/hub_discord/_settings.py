"""``[extensions.discord]``: the settings, each with a default that works except the token."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr, field_validator

from hub.platform import DEFAULT_ACCOUNT, PlatformSettings, host_name

__all__ = ["DiscordSettings", "DiscordChannel", "MEDIA_HOSTS"]

MEDIA_HOSTS = ("cdn.discordapp.com", "media.discordapp.net")
"""Where Discord serves attachments: an attachment's URL elsewhere is never fetched."""


class DiscordSettings(PlatformSettings):
    """What the operator may set under ``[extensions.discord]``.

    ``allowed_users`` (user ids, in guilds and DMs), ``loop_guard_*`` and ``send_*`` are
    every platform's ([`hub.platform.PlatformSettings`][hub.platform.PlatformSettings]).
    """

    shared_by_accounts = ("live",)  # one output (live or whole) and one prompt serve every account

    token: SecretStr = Field(SecretStr(""), validate_default=True)
    """The bot token, from the environment: ``token = "${DISCORD_BOT_TOKEN}"``."""
    allowed_guilds: list[int] = Field(default_factory=list)
    """Guild (server) ids the bot answers in; empty: every guild it is in."""
    allowed_channels: list[int] = Field(default_factory=list)
    """Channel ids the bot answers in (a thread counts as its parent too); empty: all."""
    channels: list[int] = Field(default_factory=list)
    """Channels where the bot answers every message, not only mentions and replies."""
    dms: bool = True
    """Answer direct messages (guild and channel allow-lists do not apply to DMs)."""
    answer_bots: bool = False
    """Answer other bots (and webhooks); the loop guard still bounds the exchange."""
    typing: bool = True
    """Show "HubBot is typing..." in a channel while a run for it is in progress."""
    channel_rate: tuple[int, float] = (5, 5.0)
    """Messages per seconds to one channel (Discord allows about 5 per 5 s)."""
    global_rate: tuple[int, float] = (40, 1.0)
    """Messages per seconds overall (Discord's global limit is 50 requests a second)."""
    live: bool = False
    """Edit one message in place while the model writes the reply (then the final text)."""
    live_interval: float = Field(1.0, ge=0.1, le=60)
    """Seconds between edits of a live reply (Discord's edit bucket is about 5 per 5 s)."""
    ready_timeout: float = Field(60.0, gt=0)
    """Seconds ``hub run`` waits for the login and the gateway before it gives up."""
    guild_ready_timeout: float = Field(2.0, ge=0)
    """Seconds discord.py waits for guild data after connecting (its own default)."""
    shard_count: int = Field(0, ge=0, le=4096)
    """0: one gateway connection. N: the gateway in N shards (Discord requires them from
    2,500 guilds); each worker sharing the store connects the shards whose lease
    (``discord:shard:<bot id>:<i>``) it holds, and takes over those of a worker that died."""
    guild_ids: list[int] = Field(default_factory=list)
    """Guilds the slash commands are registered in (they appear at once); empty: globally
    (Discord may take a while to show new global commands everywhere)."""
    lease_ttl: float = Field(30.0, ge=1, le=3600)
    """Seconds a shard's lease lasts unrenewed: how long a dead worker's shards stay
    disconnected before another worker sharing the store takes them over."""
    media_hosts: list[str] = Field(default_factory=list)
    """Hosts added to `MEDIA_HOSTS` that attachments may be fetched from (a host, or
    any host under it); an attachment is fetched only from them, and only at public addresses."""

    @field_validator("media_hosts")
    @classmethod
    def _media_hosts(cls, v: list[str]) -> list[str]:
        return [host_name(h) for h in v]

    @field_validator("token")
    @classmethod
    def _token_set(cls, v: SecretStr) -> SecretStr:
        value = v.get_secret_value().strip()
        if not value:
            raise ValueError(
                "the bot token is empty: set the environment variable DISCORD_BOT_TOKEN "
                '(the config reads it with token = "${DISCORD_BOT_TOKEN}")'
            )
        return SecretStr(value)

    @field_validator("channel_rate", "global_rate")
    @classmethod
    def _rate_positive(cls, v: tuple[int, float]) -> tuple[int, float]:
        if v[0] < 1 or v[1] <= 0:
            raise ValueError("must be [messages, seconds] with messages >= 1 and seconds > 0")
        return v


class DiscordChannel(BaseModel):
    """The args of a ``discord:channel`` context: a guild channel, thread or DM channel, and
    the account (bot) it is with ("": the platform table's)."""

    channel_id: int
    account: str = DEFAULT_ACCOUNT

"""``[extensions.slack]``: the settings, each with a default that works except the tokens."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from hub.platform import DEFAULT_ACCOUNT, MIN_SECRET_LENGTH, PlatformSettings, host_name

__all__ = ["SlackSettings", "SlackChannel", "SlackThread", "MEDIA_HOSTS", "SLACK_API"]

SLACK_API = "https://slack.com/api/"
MEDIA_HOSTS = ("files.slack.com", "slack-files.com")
"""Where Slack serves a file's ``url_private``: a file's URL elsewhere is never fetched."""


class SlackSettings(PlatformSettings):
    """What the operator may set under ``[extensions.slack]``.

    ``allowed_users`` (user ids, ``U...``), ``dm_policy``, ``loop_guard_*`` and ``send_*`` are
    every platform's ([`hub.platform.PlatformSettings`][hub.platform.PlatformSettings]).
    """

    shared_by_accounts = ("live",)  # one output (live or whole) and one prompt serve every account

    bot_token: SecretStr = Field(SecretStr(""), validate_default=True)
    """The bot token (``xoxb-...``), from the environment: ``bot_token = "${SLACK_BOT_TOKEN}"``."""
    app_token: SecretStr = SecretStr("")
    """The app-level token (``xapp-...``, scope ``connections:write``) for Socket Mode; not
    needed with the Events API (``signing_secret``)."""
    signing_secret: SecretStr = SecretStr("")
    """Set: the Events API, Slack POSTs to ``events_path`` on the hub's ``[http]`` endpoint
    (requests signed with this secret); empty: Socket Mode (``app_token``)."""
    events_path: str = "/slack/events"
    """The path of the Events API's request URL (events, slash commands) on ``[http]``."""
    base_url: str = ""
    """The Web API's base URL; empty: ``https://slack.com/api/`` (tests point it at a fake)."""
    allowed_channels: list[str] = Field(default_factory=list)
    """Channel ids (``C...``, ``G...``) the bot answers in; empty: every channel it is in.
    Direct messages are governed by ``dms`` and ``dm_policy``."""
    channels: list[str] = Field(default_factory=list)
    """Channels where the bot answers every message, not only mentions and its threads."""
    dms: bool = True
    """Answer direct messages."""
    answer_bots: bool = False
    """Answer other bots; the loop guard still bounds the exchange."""
    reply_in_thread: bool = True
    """A mention at the top of a channel is answered in a thread under it (the thread is then
    the conversation); false: in the channel itself."""
    live: bool = False
    """Edit one message in place (``chat.update``) while the model writes the reply."""
    live_interval: float = Field(1.0, ge=0.5, le=60)
    """Seconds between edits of a live reply (``chat.update`` is Tier 3: about 50 a minute)."""
    channel_rate: tuple[int, float] = (1, 1.0)
    """Messages (and edits) per seconds to one channel (Slack allows about one a second per channel)."""
    global_rate: tuple[int, float] = (300, 60.0)
    """Messages per seconds across the workspace (Slack: several hundred a minute)."""
    update_rate: tuple[int, float] = (50, 60.0)
    """Edits (``chat.update``, live replies) per seconds across the workspace (Tier 3: about 50 a minute)."""
    lease_ttl: float = Field(30.0, ge=1, le=3600)
    """Seconds the Socket Mode lease (``slack:socket:<bot user id>``) lasts unrenewed: how
    long a dead worker's connection stays down before another worker sharing the store connects."""
    ready_timeout: float = Field(30.0, gt=0)
    """Seconds ``hub run`` waits for ``auth.test`` before it gives up."""
    max_request_age: float = Field(300.0, ge=10, le=300)
    """Events API: seconds a signed request stays valid (at most Slack's 300); an older timestamp is a replay."""
    media_hosts: list[str] = Field(default_factory=list)
    """Hosts added to `MEDIA_HOSTS` that files may be downloaded from (a host, or any
    host under it), only at public addresses."""

    @field_validator("media_hosts")
    @classmethod
    def _media_hosts(cls, v: list[str]) -> list[str]:
        return [host_name(h) for h in v]

    @field_validator("bot_token")
    @classmethod
    def _bot_token(cls, v: SecretStr) -> SecretStr:
        value = v.get_secret_value().strip()
        if not value:
            raise ValueError(
                "the bot token is empty: set the environment variable SLACK_BOT_TOKEN to the app's "
                'Bot User OAuth Token, xoxb-... (the config reads it with bot_token = "${SLACK_BOT_TOKEN}")'
            )
        if not value.startswith("xoxb-"):
            raise ValueError("the bot token must be the Bot User OAuth Token, which starts with xoxb-")
        return SecretStr(value)

    @field_validator("signing_secret")
    @classmethod
    def _signing_secret(cls, v: SecretStr) -> SecretStr:
        value = v.get_secret_value().strip()
        if v.get_secret_value() and not value:  # stripped to "", it would silently mean Socket Mode
            raise ValueError(
                "the signing secret is blank (only whitespace): set SLACK_SIGNING_SECRET to the app's "
                'Signing Secret, or leave signing_secret empty ("") for Socket Mode'
            )
        if value and len(value) < MIN_SECRET_LENGTH:
            raise ValueError(f"the signing secret is {len(value)} characters: Slack's has 32; copy it whole")
        return SecretStr(value)

    @model_validator(mode="after")
    def _app_token(self) -> SlackSettings:
        value = self.app_token.get_secret_value().strip()
        if self.socket_mode:
            if not value:
                raise ValueError(
                    "Socket Mode needs the app-level token: set SLACK_APP_TOKEN to an xapp-... token "
                    '(app_token = "${SLACK_APP_TOKEN}"), or set signing_secret to use the Events API'
                )
            if not value.startswith("xapp-"):
                raise ValueError("app_token must be an app-level token, which starts with xapp-")
        self.app_token = SecretStr(value)
        return self

    @model_validator(mode="after")
    def _accounts_apart(self) -> SlackSettings:
        """Each account is its own app: its own bot token and, with the Events API, its own path."""
        tokens: dict[str, str] = {}
        paths: dict[str, str] = {}
        for name, account in self.every_account():
            where = f"accounts.{name}" if name else "the platform table"
            if (other := tokens.setdefault(account.bot_token.get_secret_value(), where)) != where:
                raise ValueError(f"accounts.{name}.bot_token: the same bot as {other}: give each account its own")
            if not account.socket_mode and (other := paths.setdefault(account.events_path, where)) != where:
                raise ValueError(
                    f"accounts.{name}.events_path: the same path as {other}: give each account its own events_path"
                )
        return self

    @field_validator("events_path")
    @classmethod
    def _events_path(cls, v: str) -> str:
        if not v.startswith("/") or v == "/":
            raise ValueError(f"events_path must be a path such as /slack/events, not {v!r}")
        return v

    @field_validator("channel_rate", "global_rate", "update_rate")
    @classmethod
    def _rate_positive(cls, v: tuple[int, float]) -> tuple[int, float]:
        if v[0] < 1 or v[1] <= 0:
            raise ValueError("must be [messages, seconds] with messages >= 1 and seconds > 0")
        return v

    @property
    def socket_mode(self) -> bool:
        return not self.signing_secret.get_secret_value()

    def api_url(self) -> str:
        url = self.base_url or SLACK_API
        return url if url.endswith("/") else url + "/"


class SlackChannel(BaseModel):
    """The args of ``slack:channel``: a direct message (or a channel answered outside threads),
    and the account (bot) it is with ("": the platform table's)."""

    channel_id: str
    account: str = DEFAULT_ACCOUNT


class SlackThread(BaseModel):
    """The args of ``slack:thread``: one thread of a channel, by its parent message's ``ts``."""

    channel_id: str
    thread_ts: str
    account: str = DEFAULT_ACCOUNT

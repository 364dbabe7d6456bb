"""``[extensions.matrix]``: the settings, each with a default that works except the
homeserver, the user and a way to log in."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from hub.platform import PlatformSettings

__all__ = ["MatrixSettings", "MatrixRoom", "USER_ID", "ROOM_ID"]

USER_ID = re.compile(r"@[^:\s]+:[^\s]+")
"""A Matrix user id, ``@localpart:server.name``."""
ROOM_ID = re.compile(r"![^:\s]+:[^\s]+")
"""A Matrix room id, ``!opaque:server.name`` (an alias ``#room:server`` is not an id)."""


class MatrixSettings(PlatformSettings):
    """What the operator may set under ``[extensions.matrix]``; ``homeserver``, ``user_id``
    and one of ``access_token`` and ``password`` are required.

    ``allowed_users`` (user ids, ``@ann:example.org``), ``dm_policy``, ``loop_guard_*`` and
    ``send_*`` are every platform's ([`hub.platform.PlatformSettings`][hub.platform.PlatformSettings]).
    """

    homeserver: str
    """The homeserver's client-server API base URL, ``https://matrix.example.org``."""
    user_id: str
    """The bot's account, ``@hubbot:example.org``."""
    access_token: SecretStr = SecretStr("")
    """An access token for the account: ``access_token = "${MATRIX_ACCESS_TOKEN}"``. Or
    ``password``, used once: the device it makes is kept in the data dir."""
    password: SecretStr = SecretStr("")
    """The account's password (``"${MATRIX_PASSWORD}"``), used only when no access token is
    given and no device was kept yet: the login's token and device id are kept in
    ``<data_dir>/matrix/`` and used from then on."""
    device_name: str = "Hub"
    """The name of the device a password login creates (shown in the account's sessions)."""
    allowed_rooms: list[str] = Field(default_factory=list)
    """Room ids the bot answers in and joins when invited; empty: every room."""
    rooms: list[str] = Field(default_factory=list)
    """Group rooms where the bot answers every message, not only mentions and replies."""
    groups: Literal["mentions", "none"] = "mentions"
    """In group rooms: answer mentions of the bot and replies to it, or nothing (direct
    rooms only; ``rooms`` still answered)."""
    autojoin: bool = True
    """Join a room when invited: by anyone ``allowed_users`` lets in (everyone when it is
    empty), to a room ``allowed_rooms`` lets in. Under ``dm_policy = "pairing"`` a direct
    invite from a user not let in is weighed as a message of theirs would be: from an
    approved user it is joined; from a stranger it is joined once, to tell their pairing
    code there at once; a stranger told their code already is declined."""
    max_rooms: int = Field(100, ge=1)
    """Rooms the bot stays in at most: an invite past it is declined (anyone on the
    federation may invite the bot, and each joined room is synced from then on)."""
    bots: list[str] = Field(default_factory=list)
    """User ids of other bots: their messages are answered only while the loop guard allows."""
    live: bool = False
    """Edit one message in place (``m.replace``) while the model writes the reply."""
    live_interval: float = Field(1.0, ge=0.1, le=60)
    """Seconds between edits of a live reply."""
    markdown: bool = True
    """Send replies with an HTML body (``org.matrix.custom.html``) rendered from their
    Markdown, beside the plain ``body``; false: plain text only."""
    notice: bool = False
    """Send replies as ``m.notice`` (what bots send by convention; other bots ignore notices)."""
    typing: bool = True
    """Show "typing..." in a room while a run for it is in progress."""
    room_rate: tuple[int, float] = (5, 5.0)
    """Messages (and edits) per seconds to one room."""
    global_rate: tuple[int, float] = (20, 1.0)
    """Messages per seconds overall (a homeserver's rc_message is about 0.2/s burst 10 for
    ordinary users; ask its admin to exempt the bot, or lower this)."""
    sync_timeout: float = Field(30.0, ge=0, le=300)
    """Seconds a long-polling ``/sync`` waits for news."""
    lease_ttl: float = Field(30.0, ge=1, le=3600)
    """Seconds the sync lease (``matrix:sync:<user id>``) lasts unrenewed: how long a dead
    worker's sync stays stopped before another worker sharing the store takes it over."""
    ready_timeout: float = Field(60.0, gt=0)
    """Seconds ``hub run`` waits for the login before it gives up."""

    @field_validator("homeserver")
    @classmethod
    def _homeserver(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{v!r} is not the homeserver's URL, like 'https://matrix.example.org'")
        return v

    @field_validator("user_id")
    @classmethod
    def _user_id(cls, v: str) -> str:
        v = v.strip()
        if not USER_ID.fullmatch(v):
            raise ValueError(f"{v!r} is not a Matrix user id, like '@hubbot:example.org'")
        return v

    @field_validator("allowed_rooms", "rooms")
    @classmethod
    def _room_ids(cls, v: list[str]) -> list[str]:
        for room in v:
            if not ROOM_ID.fullmatch(room):
                raise ValueError(
                    f"{room!r} is not a room id, like '!abc123:example.org' (a room's settings show it; "
                    "an alias '#room:server' is not an id)"
                )
        return v

    @field_validator("bots")
    @classmethod
    def _user_ids(cls, v: list[str]) -> list[str]:
        for user in v:
            if not USER_ID.fullmatch(user):
                raise ValueError(f"{user!r} is not a Matrix user id, like '@otherbot:example.org'")
        return v

    @field_validator("room_rate", "global_rate")
    @classmethod
    def _rate_positive(cls, v: tuple[int, float]) -> tuple[int, float]:
        if v[0] < 1 or v[1] <= 0:
            raise ValueError("must be [messages, seconds] with messages >= 1 and seconds > 0")
        return v

    @model_validator(mode="after")
    def _a_way_in(self) -> MatrixSettings:
        token = self.access_token.get_secret_value().strip()
        password = self.password.get_secret_value()
        if not token and not password:
            raise ValueError(
                'no way to log in: set access_token (access_token = "${MATRIX_ACCESS_TOKEN}") or, '
                'for the first start, password (password = "${MATRIX_PASSWORD}")'
            )
        self.access_token = SecretStr(token)
        return self

    def localpart(self) -> str:
        """``hubbot`` of ``@hubbot:example.org``."""
        return self.user_id[1:].split(":", 1)[0]


class MatrixRoom(BaseModel):
    """The args of a ``matrix:room`` context: the room's id, ``!abc:example.org``."""

    room_id: str

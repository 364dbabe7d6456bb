"""``[extensions.signal]``: the settings, each with a default that works except the bot's
number (and the API's URL, when it is not on this machine)."""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator

from hub.platform import PlatformSettings, check_secret_length

__all__ = ["SignalSettings", "SignalChat", "GROUP_PREFIX", "group_id", "number", "person"]

GROUP_PREFIX = "group."
"""How signal-cli-rest-api names a group to send to: ``group.`` and the base64 of the
internal id that envelopes carry (``groupInfo.groupId``)."""
_NUMBER = re.compile(r"\+[1-9][0-9]{6,14}")


def number(value: str) -> str:
    """A phone number in international form, ``+15550001111`` (spaces and dashes dropped).

    Raises:
        ValueError: not such a number.
    """
    v = re.sub(r"[\s\-().]", "", str(value))
    if not _NUMBER.fullmatch(v):
        raise ValueError(f"{value!r} is not a phone number in international form, like +15550001111")
    return v


def person(value: str) -> str:
    """A Signal user as ``allowed_users`` and ``bots`` name one: a number (``+1555...``) or
    the account's UUID (users who hide their number are known by it alone)."""
    v = str(value).strip()
    try:
        return str(uuid.UUID(v))
    except ValueError:
        pass
    try:
        return number(v)
    except ValueError:
        raise ValueError(f"{value!r} is neither a phone number (+15550001111) nor a Signal account UUID") from None


def group_id(value: str) -> str:
    """A group as the REST API sends to it (``group.<base64>``), from that form or from the
    internal id envelopes carry (``groupInfo.groupId``).

    Raises:
        ValueError: neither form of a Signal group id (32 bytes, base64).
    """
    v = str(value).strip()
    internal = v
    if v.startswith(GROUP_PREFIX):
        try:
            internal = base64.b64decode(v[len(GROUP_PREFIX) :], validate=True).decode("ascii")
        except (binascii.Error, UnicodeDecodeError):
            raise ValueError(f"{value!r} is not a Signal group id (group. and base64)") from None
    try:
        raw = base64.b64decode(internal, validate=True)
    except binascii.Error:
        raw = b""
    if len(raw) != 32:
        raise ValueError(
            f"{value!r} is not a Signal group id: GET /v1/groups/<number> on the REST API lists them "
            "(the id field, group.…)"
        )
    return GROUP_PREFIX + base64.b64encode(internal.encode("ascii")).decode("ascii")


class SignalSettings(PlatformSettings):
    """What the operator may set under ``[extensions.signal]``.

    ``allowed_users`` (numbers, ``+15550001111``, or account UUIDs), ``dm_policy``,
    ``loop_guard_*`` and ``send_*`` are every platform's
    ([`hub.platform.PlatformSettings`][hub.platform.PlatformSettings]). ``dm_policy`` applies to direct
    chats; in groups ``allowed_users`` and ``allowed_groups`` do.
    """

    url: str = "http://127.0.0.1:8080"
    """signal-cli-rest-api's base URL; it must run with ``MODE=json-rpc`` (or ``json-rpc-native``)."""
    number: str
    """The bot's Signal number, registered or linked on that API, in international form."""
    token: SecretStr = SecretStr("")
    """A bearer token sent with every request, for a proxy that guards the API (the REST API
    itself has no authentication); empty: none. At least 16 characters."""
    allowed_groups: list[str] = Field(default_factory=list)
    """Groups the bot answers in (``group.…`` ids, as ``GET /v1/groups/<number>`` lists
    them); empty: every group it is in."""
    groups: list[str] = Field(default_factory=list)
    """Groups where every message is answered, not only mentions of the bot and replies to it."""
    bots: list[str] = Field(default_factory=list)
    """Numbers or UUIDs of other bots: their messages count against the loop guard."""
    typing: bool = True
    """Show "typing..." in the chat while the model writes the answer."""
    read_receipts: bool = True
    """Send a read receipt for each message once it is recorded."""
    quote: Literal["groups", "always", "never"] = "groups"
    """Which replies quote the message they answer (the first message of a reply does)."""
    text_mode: Literal["styled", "normal"] = "styled"
    """``styled``: the API turns ``**bold**``, ``*italic*``, ``~strike~``, ``||spoiler||`` and
    `` `mono` `` into Signal's text styles; ``normal``: sent as typed."""
    chat_rate: tuple[int, float] = (5, 5.0)
    """Messages per seconds to one chat."""
    rate: tuple[int, float] = (10, 1.0)
    """Messages per seconds from the number in all (Signal rate-limits new senders hard)."""
    lease_ttl: float = Field(30.0, ge=1, le=3600)
    """Seconds the receive lease (``signal:receive:<number>``) lasts unrenewed: how long a dead
    worker's websocket stays unread before another worker sharing the store takes it over."""
    ready_timeout: float = Field(30.0, gt=0)
    """Seconds ``hub run`` waits for the REST API to answer at start."""
    reconnect_max: float = Field(30.0, ge=0.1, le=600)
    """Longest wait, in seconds, between attempts to reconnect the websocket (from 0.5 s, doubling)."""

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be signal-cli-rest-api's http(s) URL, such as http://127.0.0.1:8080, not {v!r}")
        return v

    @field_validator("number")
    @classmethod
    def _number(cls, v: str) -> str:
        if not str(v).strip():
            raise ValueError(
                'number is empty: set it to the bot\'s Signal number (number = "${SIGNAL_NUMBER}", +15550001111)'
            )
        return number(v)

    @field_validator("token")
    @classmethod
    def _token(cls, v: SecretStr) -> SecretStr:
        value = v.get_secret_value().strip()
        if value:
            check_secret_length(value, what="token ")
        return SecretStr(value)

    @field_validator("allowed_groups", "groups")
    @classmethod
    def _groups(cls, v: list[str]) -> list[str]:
        return [group_id(g) for g in v]

    @field_validator("bots", "allowed_users")
    @classmethod
    def _people(cls, v: list[int | str]) -> list[str]:
        return [person(str(p)) for p in v]

    @field_validator("chat_rate", "rate")
    @classmethod
    def _rate_positive(cls, v: tuple[int, float]) -> tuple[int, float]:
        if v[0] < 1 or v[1] <= 0:
            raise ValueError("must be [messages, seconds] with messages >= 1 and seconds > 0")
        return v


class SignalChat(BaseModel):
    """The args of ``signal:chat``: a direct chat (the user's number, or their UUID when they
    hide it) or a group (``group.…``)."""

    chat: str

    @property
    def is_group(self) -> bool:
        return self.chat.startswith(GROUP_PREFIX)

"""What a frame of the receive websocket holds, read from its JSON (pure).

In json-rpc mode signal-cli-rest-api writes each message signal-cli receives as one text
frame, ``{"envelope": {...}, "account": "+1555..."}`` (the ``params`` of signal-cli's
``receive`` notification), or ``{"error": "..."}``. An envelope names its sender
(``sourceNumber``, ``sourceUuid``; the number is missing when the user hides it) and carries
one of ``dataMessage`` (text, ``attachments``, ``groupInfo``, ``mentions``, ``quote``,
``reaction``), ``editMessage``, ``syncMessage`` (what the account itself sent from another
device), ``receiptMessage``, ``typingMessage``, ``callMessage`` or ``storyMessage``.

A message is known by its author and its timestamp: Signal's own id of a message, the one a
quote, a reaction or a receipt names, and the same on a redelivery.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

from hub import MediaPart

from ._settings import GROUP_PREFIX

__all__ = ["Inbound", "Ignored", "Unreadable", "ApiNotice", "Me", "read_frame", "CHAT", "OUTPUT", "MENTION"]

CHAT = "signal:chat"
OUTPUT = "signal:message"
MENTION = "\ufffc"
"""The character a mention stands in for in a message's text (its ``start`` and ``length``
count UTF-16 code units)."""


class Unreadable(ValueError):
    """A frame of a shape this extension cannot read; what could be read of it to park it by."""

    def __init__(self, reason: str, *, author: str | None = None, timestamp: int | None = None, raw: Any = None):
        super().__init__(reason)
        self.author = author
        self.timestamp = timestamp
        self.raw = raw


@dataclass(frozen=True, slots=True)
class Ignored:
    """A frame that is not a message to answer (a receipt, typing, the bot's own), and why."""

    reason: str


@dataclass(frozen=True, slots=True)
class ApiNotice:
    """An error the REST API wrote on the socket instead of an envelope (signal-cli's)."""

    message: str


@dataclass(slots=True)
class Me:
    """The bot's account: its number, and its UUID once an envelope shows it (a mention of
    the bot by a client that knows only the UUID names it by that)."""

    number: str
    uuid: str | None = None

    def learn(self, number: Any, uuid: Any) -> None:
        if number == self.number and isinstance(uuid, str) and uuid and self.uuid is None:
            self.uuid = uuid

    def is_me(self, number: Any, uuid: Any) -> bool:
        return (bool(number) and number == self.number) or (bool(uuid) and uuid == self.uuid)


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message from a user: ``timestamp`` (milliseconds) is its id, with its author."""

    timestamp: int
    author: str
    number: str | None
    uuid: str | None
    kind: str
    text: str
    name: str = ""
    group: str | None = None
    mentioned: bool = False
    quoted: bool = False
    quote_of: int | None = None
    media: tuple[MediaPart, ...] = field(default=())
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def chat(self) -> str:
        """The conversation's key: the group (``group.…``), else the user's number (their
        UUID when they hide it)."""
        return self.group or self.number or self.author

    @property
    def platform_id(self) -> str:
        """The inbox's id: author and timestamp, which a redelivery repeats."""
        return f"signal:{self.author}:{self.timestamp}"

    def meta(self) -> dict[str, Any]:
        return {
            "chat": self.chat,
            "timestamp": self.timestamp,
            "author": self.author,
            "number": self.number,
            "uuid": self.uuid,
            "name": self.name,
            "group": self.group,
            "kind": self.kind,
            "quote_of": self.quote_of,
            "text": self.text[:200],
        }


def read_frame(frame: Any, me: Me) -> Inbound | Ignored | ApiNotice:
    """The message a websocket frame holds for the account ``me``, or why it is none.

    Raises:
        Unreadable: a frame this extension cannot read (with what could be read of it).
    """
    if not isinstance(frame, dict):
        raise Unreadable(f"a frame that is not a JSON object ({type(frame).__name__})", raw=frame)
    if "envelope" not in frame and isinstance(frame.get("error"), str):
        return ApiNotice(frame["error"])
    env = frame.get("envelope")
    if not isinstance(env, dict):
        raise Unreadable("a frame without an envelope", raw=frame)
    account = frame.get("account")
    if account and account != me.number:
        return Ignored(f"for another account ({account})")
    number, uuid = _str(env.get("sourceNumber")), _str(env.get("sourceUuid"))
    me.learn(number, uuid)
    author = uuid or number or _str(env.get("source"))
    stamp = env.get("timestamp")
    if not author or not isinstance(stamp, int) or isinstance(stamp, bool):
        raise Unreadable("an envelope without its sender or its timestamp", author=author, raw=frame)
    if me.is_me(number, uuid):
        return Ignored("the bot's own account (a linked device)")
    try:
        return _message(env, me, author=author, number=number, uuid=uuid, stamp=stamp)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise Unreadable(f"{type(e).__name__}: {e}", author=author, timestamp=stamp, raw=frame) from e


def _message(env: dict[str, Any], me: Me, *, author: str, number: str | None, uuid: str | None, stamp: int) -> Any:
    kind = "text"
    data = env.get("dataMessage")
    if data is None and isinstance(env.get("editMessage"), dict):
        kind, data = "edit", env["editMessage"]["dataMessage"]
    if data is None:
        present = [
            k for k in ("syncMessage", "receiptMessage", "typingMessage", "callMessage", "storyMessage") if k in env
        ]
        return Ignored(f"not a message ({', '.join(present) or 'an empty envelope'})")
    if not isinstance(data, dict):
        raise TypeError("dataMessage is not an object")
    group = _group(data.get("groupInfo"))
    for m in data.get("mentions") or []:  # signal-cli writes its own account with both: the UUID is learnt
        if isinstance(m, dict):
            me.learn(m.get("number"), m.get("uuid"))
    reaction = data.get("reaction")
    if isinstance(reaction, dict):
        if reaction.get("isRemove") or not me.is_me(
            reaction.get("targetAuthorNumber"), reaction.get("targetAuthorUuid")
        ):
            return Ignored("a reaction, not to the bot's message")
        emoji, target = str(reaction["emoji"]), int(reaction["targetSentTimestamp"])
        text = f"(reacted {emoji} to your message {target})"
        return _inbound(env, author, number, uuid, stamp, "reaction", text, group=group, quote_of=target)
    text = _text(data.get("message"), data.get("mentions"), me)
    media = tuple(_attachment(a) for a in data.get("attachments") or [])
    if not text.strip() and not media:
        if not data.get("sticker"):
            return Ignored("a message with no text or attachment (a group update, a timer, a deletion)")
        text = "(sent a sticker)"
    quote: dict[str, Any] = data["quote"] if isinstance(data.get("quote"), dict) else {}
    quoted = bool(quote) and me.is_me(quote.get("authorNumber"), quote.get("authorUuid"))
    me.learn(quote.get("authorNumber"), quote.get("authorUuid"))
    if kind == "edit":
        text = f"(edited their message) {text}"
    return _inbound(
        env,
        author,
        number,
        uuid,
        stamp,
        kind,
        text,
        group=group,
        mentioned=_mentions_me(data.get("mentions"), me),
        quoted=quoted,
        quote_of=int(quote["id"]) if quote.get("id") is not None else None,
        media=media,
    )


def _inbound(
    env: dict[str, Any], author: str, number: str | None, uuid: str | None, stamp: int, kind: str, text: str, **kw: Any
) -> Inbound:
    return Inbound(
        timestamp=stamp,
        author=author,
        number=number,
        uuid=uuid,
        kind=kind,
        text=text,
        name=str(env.get("sourceName") or ""),
        raw=env,
        **kw,
    )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _group(info: Any) -> str | None:
    """``group.<base64 of the internal id>``: the id the REST API sends to."""
    if not isinstance(info, dict) or not info.get("groupId"):
        return None
    return GROUP_PREFIX + base64.b64encode(str(info["groupId"]).encode("ascii")).decode("ascii")


def _mentions_me(mentions: Any, me: Me) -> bool:
    return any(isinstance(m, dict) and me.is_me(m.get("number"), m.get("uuid")) for m in mentions or [])


def _text(message: Any, mentions: Any, me: Me) -> str:
    """The text with each mention written out (``@name``), the bot's own left out; offsets
    count UTF-16 code units, as Signal counts them."""
    text = str(message or "")
    if not mentions:
        return text
    units = text.encode("utf-16-le")
    for m in sorted((m for m in mentions if isinstance(m, dict)), key=lambda m: int(m["start"]), reverse=True):
        start, length = int(m["start"]) * 2, int(m["length"]) * 2
        if me.is_me(m.get("number"), m.get("uuid")):
            shown = ""
        else:
            shown = "@" + str(m.get("name") or m.get("number") or m.get("uuid") or "someone")
        units = units[:start] + shown.encode("utf-16-le") + units[start + length :]
    return re.sub(r" {2,}", " ", units.decode("utf-16-le")).strip()


def _attachment(a: Any) -> MediaPart:
    if not isinstance(a, dict) or not a.get("id"):
        raise ValueError("an attachment without its id")
    mime = str(a.get("contentType") or "").split(";")[0].strip()
    top = mime.split("/")[0]
    kind = {"image": "image", "audio": "audio", "video": "video"}.get(top, "document")
    size = a.get("size")
    return MediaPart(
        kind=kind,
        ref=str(a["id"]),
        mime=mime,
        size=int(size) if isinstance(size, int) else None,
        name=str(a.get("filename") or ""),
        width=a.get("width") if isinstance(a.get("width"), int) else None,
        height=a.get("height") if isinstance(a.get("height"), int) else None,
    )

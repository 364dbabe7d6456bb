"""Deciding, without side effects, whether an update is a message the bot should answer.

Like python-telegram-bot's ``check_update``: `classify()` looks at one update and says
`Inbound` (answer it) or `Ignored` (and why). The stateful loop guard is
applied by the poller afterwards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from telegram import Message, MessageEntity, Update, User

from hub import MediaPart
from hub.platform import AllowList

from ._settings import TelegramSettings

__all__ = ["Inbound", "Ignored", "classify", "mentions", "media_of"]

GROUP_TYPES = frozenset({"group", "supergroup"})


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message to answer, in the shape the hub records it."""

    update_id: int
    chat_id: int
    chat_type: str
    chat_title: str | None
    message_id: int
    text: str
    user_id: int
    username: str | None
    name: str
    is_bot: bool
    reply_to: int | None
    mentioned: bool
    media: tuple[MediaPart, ...] = ()
    """The photo, document, sticker, voice note, audio or video it carries, by ``file_id``."""

    @property
    def platform_id(self) -> str:
        """Stable across redeliveries: message ids are unique within a chat."""
        return f"telegram:{self.chat_id}:{self.message_id}"

    @property
    def in_group(self) -> bool:
        return self.chat_type in GROUP_TYPES

    def meta(self) -> dict[str, Any]:
        return {
            "update_id": self.update_id,
            "chat_id": self.chat_id,
            "chat_type": self.chat_type,
            "chat_title": self.chat_title,
            "message_id": self.message_id,
            "from": {"id": self.user_id, "username": self.username, "name": self.name, "is_bot": self.is_bot},
            "user_name": self.name or self.username,
            "user_handle": self.username,
            "reply_to": self.reply_to,
            "mentioned": self.mentioned,
        }


@dataclass(frozen=True, slots=True)
class Ignored:
    update_id: int
    reason: str


def classify(update: Update, me: User, settings: TelegramSettings, allowed: AllowList) -> Inbound | Ignored:
    """Answer, or ignore and say why. ``me`` is the bot (from getMe)."""
    uid = update.update_id
    msg = update.message
    if msg is None:
        return Ignored(uid, "not a new message")
    text = msg.text if msg.text is not None else (msg.caption or "")
    media = media_of(msg)
    if not text.strip() and not media:
        return Ignored(uid, "no text")
    sender = msg.from_user
    if sender is None:
        return Ignored(uid, "no sender")
    if sender.id == me.id:
        return Ignored(uid, "own message")
    chat = msg.chat
    if allowed and not allowed.allows(chat.id, f"@{chat.username}" if chat.username else None):
        return Ignored(uid, f"chat {chat.id} is not in allowed_chats")
    if sender.is_bot and not settings.answer_bots:
        return Ignored(uid, f"from a bot ({sender.id}); answer_bots is off")
    mentioned = mentions(msg, me)
    replied = (
        msg.reply_to_message is not None
        and msg.reply_to_message.from_user is not None
        and (msg.reply_to_message.from_user.id == me.id)
    )
    if chat.type in GROUP_TYPES:
        if settings.groups == "off":
            return Ignored(uid, "groups = off")
        if settings.groups == "mention" and not (mentioned or replied):
            return Ignored(uid, "group message not addressed to the bot")
    elif chat.type != "private":
        return Ignored(uid, f"{chat.type} chats are not answered")
    return Inbound(
        update_id=uid,
        chat_id=chat.id,
        chat_type=chat.type,
        chat_title=chat.title,
        message_id=msg.message_id,
        text=text,
        user_id=sender.id,
        username=sender.username,
        name=sender.full_name,
        is_bot=sender.is_bot,
        reply_to=msg.reply_to_message.message_id if msg.reply_to_message is not None else None,
        mentioned=mentioned,
        media=media,
    )


def media_of(msg: Message) -> tuple[MediaPart, ...]:
    """The files of a message as references (``file_id``s for ``getFile``); no download here.
    A photo comes in several sizes: the largest is the one to read."""
    parts: list[MediaPart] = []
    if msg.photo:
        best = msg.photo[-1]
        parts.append(
            MediaPart(
                kind="image",
                ref=best.file_id,
                mime="image/jpeg",
                size=best.file_size,
                name=f"photo_{msg.message_id}.jpg",
                width=best.width,
                height=best.height,
            )
        )
    if msg.document is not None:
        d = msg.document
        parts.append(
            MediaPart(
                kind="document",
                ref=d.file_id,
                mime=d.mime_type or "",
                size=d.file_size,
                name=d.file_name or f"document_{msg.message_id}",
            )
        )
    if msg.sticker is not None:
        s = msg.sticker
        # static stickers are WebP pictures; animated (TGS) and video (WebM) ones are not
        mime = "video/webm" if s.is_video else "application/x-tgsticker" if s.is_animated else "image/webp"
        parts.append(
            MediaPart(
                kind="sticker" if mime == "image/webp" else "animated sticker",
                ref=s.file_id,
                mime=mime,
                size=s.file_size,
                name=f"sticker {s.emoji or ''}".strip(),
                width=s.width,
                height=s.height,
            )
        )
    media: tuple[tuple[str, Any], ...] = (
        ("voice", msg.voice),
        ("audio", msg.audio),
        ("video", msg.video),
        ("video_note", msg.video_note),  # a round video: its sound is heard like a voice note
    )
    for kind, item in media:
        if item is not None:
            default = "audio/ogg" if kind == "voice" else "video/mp4" if kind == "video_note" else ""
            parts.append(
                MediaPart(
                    kind=kind,
                    ref=item.file_id,
                    mime=getattr(item, "mime_type", None) or default,
                    size=item.file_size,
                    name=getattr(item, "file_name", None) or f"{kind}_{msg.message_id}",
                )
            )
    return tuple(parts)


def mentions(msg: Message, me: User) -> bool:
    """The bot is named: an @username or text mention, or a /command (bare or /cmd@bot)."""
    username = (me.username or "").lower()
    entities = {**msg.parse_entities(), **msg.parse_caption_entities()}
    for entity, part in entities.items():
        if entity.type == MessageEntity.MENTION and username and part[1:].lower() == username:
            return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user is not None and entity.user.id == me.id:
            return True
        if entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
            _, at, target = part.partition("@")
            # a bare /command reaches bots in privacy mode because it is meant for them
            if not at or target.lower() == username:
                return True
    text = msg.text or msg.caption or ""
    # clients that send no entities (some bridges): look for the name itself
    return bool(username) and re.search(rf"(?<![\w@])@{re.escape(username)}(?!\w)", text, re.IGNORECASE) is not None

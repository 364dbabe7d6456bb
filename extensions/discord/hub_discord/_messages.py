"""Which Discord messages the bot answers, and what the model reads of them: the intents,
whether a message is addressed to the bot, `ignore_reason()` (pure over the message)
and `message_text()`; with the output's limits and the mentions it may ping.
"""

from __future__ import annotations

import discord

from hub import MediaPart
from hub.platform import AllowList

from ._settings import DiscordSettings

MAX_LENGTH = 2000
MAX_FILES = 10  # attachments on one message
MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # a bot's upload limit in a server without boosts
OUTPUT = "discord:message"
CONTEXT = "discord:channel"
# The model must never ping @everyone, @here or a role; users it names by <@id>, and the
# author it replies to, may be pinged.
SAFE_MENTIONS = discord.AllowedMentions(everyone=False, roles=False, users=True, replied_user=True)
_ANSWERED_TYPES = (discord.MessageType.default, discord.MessageType.reply)


def intents() -> discord.Intents:
    """The gateway intents the bot needs; ``message_content`` is privileged (enable it in the
    developer portal, or guild messages arrive without their text)."""
    i = discord.Intents.none()
    i.guilds = True
    i.guild_messages = True
    i.dm_messages = True
    i.message_content = True
    return i


# What the invite asks for (README, docs/platforms/discord.md): read channels and threads and
# their history (a reply quotes the message it answers), answer there, and send files and
# voice notes. Named flags, so the number in the docs is checked against them.
INVITE_PERMISSIONS = discord.Permissions(
    view_channel=True,
    send_messages=True,
    send_messages_in_threads=True,
    read_message_history=True,
    attach_files=True,
)


def invite_url(application_id: int) -> str:
    """The link that adds the bot to a server with `INVITE_PERMISSIONS` (scope ``bot``)."""
    return discord.utils.oauth_url(application_id, permissions=INVITE_PERMISSIONS, scopes=("bot",))


def addressed_to(message: discord.Message, me: discord.abc.User) -> bool:
    """A mention of the bot (its user or its managed role), or a reply to one of its messages."""
    if any(u.id == me.id for u in message.mentions):
        return True
    if any(r.tags is not None and r.tags.bot_id == me.id for r in message.role_mentions):
        return True
    ref = message.reference
    resolved = ref.resolved if ref is not None else None
    return isinstance(resolved, discord.Message) and resolved.author.id == me.id


def ignore_reason(
    message: discord.Message,
    me: discord.abc.User,
    settings: DiscordSettings,
    *,
    guilds: AllowList,
    channels: AllowList,
    users: AllowList,
    answer_all: frozenset[int],
) -> str | None:
    """Why the bot leaves ``message`` alone, or None to answer it (the loop guard aside)."""
    author = message.author
    if author.id == me.id:
        return "its own message"
    if message.type not in _ANSWERED_TYPES:
        return f"a {message.type.name} message"
    if (author.bot or message.webhook_id is not None) and not settings.answer_bots:
        return "from a bot (answer_bots = false)"
    if message.guild is None:
        if not settings.dms:
            return "a DM (dms = false)"
        # under dm_policy "allowlist" or "pairing", DiscordBot decides who may talk in private
        if settings.dm_policy == "open" and not users.allows(author.id):
            return "author not in allowed_users"
        return None
    if not users.allows(author.id):
        return "author not in allowed_users"
    if not guilds.allows(message.guild.id):
        return "guild not in allowed_guilds"
    channel = message.channel
    parent = getattr(channel, "parent_id", None)
    if not channels.allows(channel.id, parent):
        return "channel not in allowed_channels"
    if channel.id in answer_all or parent in answer_all or addressed_to(message, me):
        return None
    return "not addressed to the bot"


def message_text(message: discord.Message) -> str:
    """What the model reads: the text with mentions as names (attachments are
    `media_of()`'s, shown after it)."""
    return message.clean_content.strip() if message.content else ""


def media_of(message: discord.Message) -> list[MediaPart]:
    """A message's attachments as references (their CDN URLs), fetched only when a run needs them."""
    parts = []
    for a in message.attachments:
        mime = (a.content_type or "").split(";")[0].strip()
        kind = (
            "image"
            if mime.startswith("image/")
            else "audio"
            if mime.startswith("audio/")
            else ("video" if mime.startswith("video/") else "document")
        )
        if a.is_voice_message():
            kind = "voice"
        parts.append(
            MediaPart(kind=kind, ref=a.url, mime=mime, size=a.size, name=a.filename, width=a.width, height=a.height)
        )
    return parts

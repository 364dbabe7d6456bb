"""Which Slack events the bot answers, and where: `classify()` (pure over the event) turns
a ``message`` or ``app_mention`` event into an `Inbound` (the conversation, the text,
the files) or an `Ignored` (why not).

Where: a direct message channel is one conversation (``slack:channel:D123``), its threads
included; in a channel every thread is a conversation of its own
(``slack:thread:C123/1700000000.000100``), and a mention at the top of a channel starts one
under itself (``reply_in_thread``). The answer goes in the thread it was asked in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hub import MediaPart
from hub.platform import AllowList

from ._settings import SlackSettings

__all__ = ["Inbound", "Ignored", "classify", "is_dm", "message_text", "media_of", "CHANNEL", "THREAD", "OUTPUT"]

CHANNEL = "slack:channel"
THREAD = "slack:thread"
OUTPUT = "slack:message"

# message subtypes a person sends; edits, deletions, joins and the like are not questions
_ANSWERED_SUBTYPES = {None, "file_share", "thread_broadcast", "me_message"}
_BOT_SUBTYPES = {"bot_message"}
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")


@dataclass(frozen=True, slots=True)
class Inbound:
    """An event to answer: in ``channel_id``; the conversation is the thread ``thread_ts``
    (None: the channel's); ``asked_in`` is the thread the message itself is in (the answer goes there)."""

    channel_id: str
    ts: str
    user: str
    text: str
    thread_ts: str | None
    is_dm: bool
    from_bot: bool
    team: str | None = None
    media: tuple[MediaPart, ...] = field(default=())
    asked_in: str | None = None

    @property
    def context(self) -> str:
        return THREAD if self.thread_ts is not None else CHANNEL

    @property
    def args(self) -> dict[str, str]:
        if self.thread_ts is not None:
            return {"channel_id": self.channel_id, "thread_ts": self.thread_ts}
        return {"channel_id": self.channel_id}

    @property
    def platform_id(self) -> str:
        """The message's id in the inbox: a mention arrives as ``message`` and ``app_mention``
        both, and Slack redelivers an event it thinks was not acknowledged: one answer."""
        return f"slack:{self.channel_id}:{self.ts}"

    def meta(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "channel_id": self.channel_id,
            "thread_ts": self.asked_in or self.thread_ts,
            "team_id": self.team,
            "author_bot": self.from_bot,
            "dm": self.is_dm,
        }


@dataclass(frozen=True, slots=True)
class Ignored:
    reason: str


def is_dm(event: dict[str, Any]) -> bool:
    return event.get("channel_type") == "im" or str(event.get("channel", "")).startswith("D")


def classify(
    event: dict[str, Any],
    *,
    bot_user: str,
    bot_id: str | None,
    settings: SlackSettings,
    channels: AllowList,
    users: AllowList,
    known_thread: bool = False,
) -> Inbound | Ignored:
    """What to do with a ``message`` or ``app_mention`` event. ``known_thread``: the event is
    in a thread the bot already answers in (its replies need no mention)."""
    kind = event.get("type")
    user = event.get("user") or ""
    channel, ts = event.get("channel"), event.get("ts")
    if kind not in ("message", "app_mention"):
        return Ignored(f"a {kind} event")
    if not isinstance(channel, str) or not isinstance(ts, str):
        return Ignored("no channel or ts")
    from_bot = event.get("subtype") in _BOT_SUBTYPES or bool(event.get("bot_id"))
    reason = _sender_reason(event, bot_user=bot_user, bot_id=bot_id, from_bot=from_bot, settings=settings)
    if reason is not None:
        return Ignored(reason)
    text = message_text(event.get("text") or "", bot_user)
    media = media_of(event)
    if not text and not media:
        return Ignored("no text")
    thread_ts = event.get("thread_ts")
    thread = thread_ts if isinstance(thread_ts, str) and thread_ts else None

    def inbound(thread_ts: str | None, dm: bool) -> Inbound:
        return Inbound(
            channel_id=channel,
            ts=ts,
            user=user or str(event.get("bot_id")),
            text=text,
            thread_ts=thread_ts,
            is_dm=dm,
            from_bot=from_bot,
            team=event.get("team"),
            media=tuple(media),
            asked_in=thread,
        )

    if is_dm(event):
        if not settings.dms:
            return Ignored("a direct message (dms = false)")
        # under dm_policy "allowlist" or "pairing", the intake decides who may talk in private
        if settings.dm_policy == "open" and not users.allows(user):
            return Ignored("author not in allowed_users")
        return inbound(None, True)  # a DM is one conversation, its threads too
    if not users.allows(user):
        return Ignored("author not in allowed_users")
    if not channels.allows(channel):
        return Ignored("channel not in allowed_channels")
    addressed = kind == "app_mention" or f"<@{bot_user}" in (event.get("text") or "")
    if not (addressed or channel in settings.channels or (thread is not None and known_thread)):
        return Ignored("not addressed to the bot")
    if thread is None and settings.reply_in_thread:
        thread = ts  # a thread under the message that asked
    return inbound(thread, False)


def _sender_reason(
    event: dict[str, Any], *, bot_user: str, bot_id: str | None, from_bot: bool, settings: SlackSettings
) -> str | None:
    """Why a message is not one to answer for who sent it, or what kind it is (None: it is)."""
    user, subtype = event.get("user") or "", event.get("subtype")
    if user == bot_user or (bot_id is not None and event.get("bot_id") == bot_id):
        return "its own message"
    if subtype not in _ANSWERED_SUBTYPES and not (from_bot and subtype in _BOT_SUBTYPES):
        return f"a {subtype} message"
    if from_bot and not settings.answer_bots:
        return "from a bot (answer_bots = false)"
    if not user and not from_bot:
        return "no author"
    return None


def message_text(text: str, bot_user: str) -> str:
    """What the model reads: the bot's own mention taken out, other users' kept as ``<@U..>``
    (the model may write them to ping someone), Slack's three escapes undone."""
    text = _MENTION.sub(lambda m: "" if m.group(1) == bot_user else f"<@{m.group(1)}>", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()


def media_of(event: dict[str, Any]) -> list[MediaPart]:
    """A message's files as references (their file ids), fetched through ``files.info`` only
    when a run needs them."""
    parts = []
    for f in event.get("files") or []:
        if not isinstance(f, dict) or not isinstance(f.get("id"), str) or f.get("mode") == "tombstone":
            continue
        mime = str(f.get("mimetype") or "").split(";")[0].strip()
        kind = (
            "image"
            if mime.startswith("image/")
            else "audio"
            if mime.startswith("audio/")
            else ("video" if mime.startswith("video/") else "document")
        )
        if f.get("subtype") == "slack_audio":  # a clip recorded in Slack: heard as a voice note
            kind = "voice"
        size = f.get("size")
        parts.append(
            MediaPart(
                kind=kind,
                ref=f["id"],
                mime=mime,
                size=size if isinstance(size, int) else None,
                name=str(f.get("name") or f.get("title") or ""),
                width=f.get("original_w") if isinstance(f.get("original_w"), int) else None,
                height=f.get("original_h") if isinstance(f.get("original_h"), int) else None,
            )
        )
    return parts

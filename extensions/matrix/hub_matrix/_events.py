"""Which room events the bot answers, and what the model reads of them: `classify()`,
pure over the event as the homeserver sent it (a dict), so that an event the client library
could not parse is judged the same way, and a malformed one is ignored, never a crash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hub import MediaPart

from ._settings import MatrixSettings

__all__ = ["Inbound", "Ignored", "Encrypted", "classify", "strip_reply_fallback"]

_MEDIA = {"m.image": "image", "m.file": "document", "m.audio": "audio", "m.video": "video"}
_TEXT = ("m.text", "m.emote")


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message to answer (access and the loop guard aside)."""

    room_id: str
    event_id: str
    sender: str
    text: str
    direct: bool
    media: tuple[MediaPart, ...] = ()
    mentioned: bool = False
    replied_to: str | None = None
    ts: int = 0

    @property
    def platform_id(self) -> str:
        return f"matrix:{self.event_id}"

    def meta(self) -> dict[str, Any]:
        return {"event_id": self.event_id, "room_id": self.room_id, "sender": self.sender, "direct": self.direct}


@dataclass(frozen=True, slots=True)
class Ignored:
    event_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Encrypted:
    """An end-to-end encrypted message: the bot cannot read it (see the docs)."""

    room_id: str
    event_id: str
    sender: str
    direct: bool = field(default=False)


def strip_reply_fallback(body: str) -> str:
    """A reply's body without the quoted lines older clients put first (``> <@a:b> ...``)."""
    lines = body.split("\n")
    i = 0
    while i < len(lines) and lines[i].startswith(">"):
        i += 1
    if i and i < len(lines) and lines[i] == "":
        return "\n".join(lines[i + 1 :])
    return body


def _mentions(content: dict[str, Any], body: str, me: str, localpart: str, display_name: str) -> bool:
    mentions = content.get("m.mentions")
    if isinstance(mentions, dict):
        users = mentions.get("user_ids")
        if isinstance(users, list) and me in users:
            return True
    html = content.get("formatted_body")
    if isinstance(html, str) and (f"matrix.to/#/{me}" in html or f"matrix.to/#/{me.replace('@', '%40')}" in html):
        return True
    if me in body:
        return True
    # a "pill" as older clients write it: the name first, then a colon
    for name in {localpart, display_name}:
        if name and re.match(re.escape(name) + r"\s*:", body, re.IGNORECASE):
            return True
    return False


def _media_of(msgtype: str, content: dict[str, Any], body: str) -> tuple[MediaPart, str] | None:
    """A file message's file (a reference to its content URI) and its caption; None without a url."""
    url = content.get("url")
    if not isinstance(url, str):
        return None
    raw = content.get("info")
    info: dict[str, Any] = raw if isinstance(raw, dict) else {}
    size = info.get("size")
    filename = content.get("filename")
    named = isinstance(filename, str) and bool(filename)
    # Element's voice messages: m.audio marked with MSC3245's voice key (heard like any audio)
    voice = msgtype == "m.audio" and ("org.matrix.msc3245.voice" in content or "org.matrix.msc3245.voice.v2" in content)
    part = MediaPart(
        kind="voice" if voice else _MEDIA[msgtype],
        ref=url,
        mime=str(info.get("mimetype") or ""),
        size=size if isinstance(size, int) and size >= 0 else None,
        name=str(filename) if named else body,
        width=info.get("w") if isinstance(info.get("w"), int) else None,
        height=info.get("h") if isinstance(info.get("h"), int) else None,
    )
    # with a filename the body is a caption (Matrix 1.10); without, the body is the name
    return part, (body if named and body != filename else "")


def _envelope(event: Any) -> tuple[str, str, str, dict[str, Any]] | Ignored:
    """An event's id, sender, type and content; Ignored when one is missing or malformed."""
    if not isinstance(event, dict):
        return Ignored("?", "not an event object")
    event_id, sender, etype, content = (event.get(k) for k in ("event_id", "sender", "type", "content"))
    if not isinstance(event_id, str) or not event_id:
        return Ignored("?", "an event without an id")
    if not isinstance(sender, str) or not isinstance(etype, str) or not isinstance(content, dict):
        return Ignored(event_id, "a malformed event (sender, type or content missing)")
    if "state_key" in event:
        return Ignored(event_id, f"a state event ({etype})")
    return event_id, sender, etype, content


def _reply_of(content: dict[str, Any]) -> tuple[str | None, bool]:
    """The event a message replies to, and whether the message is an edit (``m.replace``)."""
    relates = content.get("m.relates_to")
    if not isinstance(relates, dict):
        return None, False
    reply = relates.get("m.in_reply_to")
    replied_to = reply.get("event_id") if isinstance(reply, dict) else None
    return (replied_to if isinstance(replied_to, str) else None), relates.get("rel_type") == "m.replace"


def classify(
    room_id: str,
    event: Any,
    *,
    me: str,
    settings: MatrixSettings,
    direct: bool,
    display_name: str = "",
) -> Inbound | Ignored | Encrypted:
    """What to do with ``event`` (a timeline event as the homeserver sent it) in ``room_id``:
    answer it (`Inbound`), refuse it (`Encrypted`), or leave it (`Ignored`)."""
    envelope = _envelope(event)
    if isinstance(envelope, Ignored):
        return envelope
    event_id, sender, etype, content = envelope
    if sender == me:
        return Ignored(event_id, "its own message")
    if etype == "m.room.encrypted":
        return Encrypted(room_id, event_id, sender, direct)
    if etype != "m.room.message":
        return Ignored(event_id, f"a {etype} event")
    msgtype, body = content.get("msgtype"), content.get("body")
    if not isinstance(body, str):
        return Ignored(event_id, "a message without a text body (redacted?)")
    replied_to, edit = _reply_of(content)
    if edit:
        return Ignored(event_id, "an edit of an earlier message")
    media: tuple[MediaPart, ...] = ()
    if msgtype in _TEXT:
        text = strip_reply_fallback(body) if replied_to else body
    elif msgtype in _MEDIA:
        found = _media_of(str(msgtype), content, body)
        if found is None:
            return Ignored(event_id, f"a {msgtype} without a url (encrypted file?)")
        media, text = (found[0],), found[1]
    else:
        return Ignored(event_id, f"a {msgtype!r} message" + (" (what bots send)" if msgtype == "m.notice" else ""))
    ts = event.get("origin_server_ts")
    inbound = Inbound(
        room_id=room_id,
        event_id=event_id,
        sender=sender,
        text=text.strip(),
        direct=direct,
        media=media,
        mentioned=_mentions(content, body, me, settings.localpart(), display_name),
        replied_to=replied_to,
        ts=ts if isinstance(ts, int) else 0,
    )
    if not inbound.text and not media:
        return Ignored(event_id, "an empty message")
    if direct or room_id in settings.rooms:
        return inbound
    if settings.groups == "none":
        return Ignored(event_id, 'a group room (groups = "none")')
    return inbound if inbound.mentioned else Ignored(event_id, "not addressed to the bot")

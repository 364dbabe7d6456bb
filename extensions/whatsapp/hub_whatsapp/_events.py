"""What a webhook POST from Meta holds, read from its JSON (pure): the messages users sent
(`Inbound`) and the statuses of the bot's own (`Status`), for this phone
number only.

A payload is ``{"object": "whatsapp_business_account", "entry": [{"changes": [{"field":
"messages", "value": {...}}]}]}``; a value carries ``messages`` (with ``contacts``: who
wrote, their ``wa_id`` and, in current payloads, ``user_id``) or ``statuses``. Anything
else (another field, another number's change) is left out, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hub import MediaPart

__all__ = ["Inbound", "Status", "Unreadable", "read_payload", "CHAT", "OUTPUT", "MEDIA_KINDS"]

CHAT = "whatsapp:chat"
OUTPUT = "whatsapp:message"
MEDIA_KINDS = ("image", "document", "audio", "video", "sticker")


class Unreadable(ValueError):
    """A payload, or a message in it, of a shape this extension cannot read; ``wamid``,
    ``wa_id`` and ``raw`` are what could be read of the message (to park it under)."""

    def __init__(self, reason: str, *, wamid: str | None = None, wa_id: str | None = None, raw: Any = None) -> None:
        super().__init__(reason)
        self.wamid = wamid
        self.wa_id = wa_id
        self.raw = raw


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message from a user: ``wamid`` is its id, ``timestamp`` when they sent it (seconds)."""

    wamid: str
    wa_id: str
    kind: str
    text: str
    timestamp: float
    name: str = ""
    user_id: str | None = None
    reply_to: str | None = None
    media: tuple[MediaPart, ...] = field(default=())
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def platform_id(self) -> str:
        """The inbox's id of the message: Meta redelivers a webhook until it gets 200, and a
        redelivery carries the same ``wamid``, so it is recorded, and answered, once."""
        return f"whatsapp:{self.wamid}"

    def meta(self) -> dict[str, Any]:
        return {
            "wamid": self.wamid,
            "wa_id": self.wa_id,
            "name": self.name,
            "timestamp": self.timestamp,
            "kind": self.kind,
            "reply_to": self.reply_to,
        }


@dataclass(frozen=True, slots=True)
class Status:
    """The status of a message the bot sent (``sent``, ``delivered``, ``read``, ``failed``)."""

    wamid: str
    wa_id: str
    status: str
    timestamp: float
    error_codes: tuple[int, ...] = ()
    error: str = ""


def read_payload(payload: Any, phone_number_id: str) -> tuple[list[Inbound | Unreadable], list[Status]]:
    """The messages and statuses of ``payload`` for ``phone_number_id``. A message that cannot
    be read is an `Unreadable` in its place (with its ``wamid`` when it has one), so the
    others are taken and that one counted towards being parked.

    Raises:
        Unreadable: the payload is not a WhatsApp webhook at all.
    """
    if not isinstance(payload, dict) or payload.get("object") != "whatsapp_business_account":
        raise Unreadable("not a WhatsApp Business Account webhook (its object is not whatsapp_business_account)")
    entries = payload.get("entry")
    if not isinstance(entries, list):
        raise Unreadable("the webhook has no entry list")
    messages: list[Inbound | Unreadable] = []
    statuses: list[Status] = []
    for entry in entries:
        for change in (entry.get("changes") if isinstance(entry, dict) else None) or []:
            if not isinstance(change, dict) or change.get("field") != "messages":
                continue
            value = change.get("value")
            if not isinstance(value, dict):
                continue
            metadata: dict[str, Any] = value["metadata"] if isinstance(value.get("metadata"), dict) else {}
            if str(metadata.get("phone_number_id", "")) != phone_number_id:
                continue  # another number of the same business account
            contacts = _contacts(value.get("contacts"))
            for msg in value.get("messages") or []:
                try:
                    messages.append(_message(msg, contacts))
                except (Unreadable, TypeError, ValueError, KeyError, AttributeError) as e:
                    wamid = msg.get("id") if isinstance(msg, dict) else None
                    sender = msg.get("from") if isinstance(msg, dict) else None
                    messages.append(
                        Unreadable(
                            f"{type(e).__name__}: {e}",
                            wamid=wamid if isinstance(wamid, str) and wamid else None,
                            wa_id=str(sender) if isinstance(sender, str | int) and sender else None,
                            raw=msg,
                        )
                    )
            for st in value.get("statuses") or []:
                if isinstance(st, dict) and isinstance(st.get("id"), str):
                    statuses.append(_status(st))
    return messages, statuses


def _contacts(value: Any) -> dict[str, tuple[str, str | None]]:
    """Who wrote, by ``wa_id`` and by ``user_id`` (a user known by their business-scoped id
    alone, who hides their number, has only the second)."""
    out: dict[str, tuple[str, str | None]] = {}
    for c in value or []:
        if not isinstance(c, dict):
            continue
        profile: dict[str, Any] = c["profile"] if isinstance(c.get("profile"), dict) else {}
        for key in ("wa_id", "user_id"):
            if c.get(key):
                out[str(c[key])] = (str(profile.get("name") or ""), c.get("user_id"))
    return out


def _message(msg: dict[str, Any], contacts: dict[str, tuple[str, str | None]]) -> Inbound:
    sender = msg.get("from") or msg.get("from_user_id")
    if not sender and len({c[1] or k for k, c in contacts.items()}) == 1:
        sender = next(iter(contacts))  # one contact: the payload's only user wrote it
    wamid, wa_id, kind = msg["id"], str(sender or ""), str(msg.get("type") or "")
    if not isinstance(wamid, str) or not wamid or not wa_id:
        raise Unreadable("a message without its id or its sender")
    name, user_id = contacts.get(wa_id, ("", None))
    context: dict[str, Any] = msg["context"] if isinstance(msg.get("context"), dict) else {}
    text = ""
    media: tuple[MediaPart, ...] = ()
    if kind == "text":
        text = str(msg["text"]["body"])
    elif kind in MEDIA_KINDS:
        part = msg[kind]
        text = str(part.get("caption") or "")
        media = (
            MediaPart(
                kind="voice" if kind == "audio" and part.get("voice") else kind,
                ref=str(part["id"]),
                mime=str(part.get("mime_type") or "").split(";")[0].strip(),
                name=str(part.get("filename") or ""),
            ),
        )
    elif kind == "reaction":
        reaction = msg["reaction"]
        emoji = reaction.get("emoji") or ""
        text = f"(reacted {emoji} to message {reaction.get('message_id')})" if emoji else "(removed a reaction)"
    elif kind == "button":
        text = str(msg["button"].get("text") or "")
    elif kind == "interactive":
        reply = msg["interactive"].get("button_reply") or msg["interactive"].get("list_reply") or {}
        text = str(reply.get("title") or "")
    elif kind == "location":
        loc = msg["location"]
        where = " ".join(str(x) for x in (loc.get("name"), loc.get("address")) if x)
        text = f"(shared a location: {loc.get('latitude')}, {loc.get('longitude')}{' ' + where if where else ''})"
    else:
        text = f"(sent a {kind or 'message'} this bot cannot read)"
    return Inbound(
        wamid=wamid,
        wa_id=wa_id,
        kind=kind,
        text=text,
        timestamp=float(msg.get("timestamp") or 0),
        name=name,
        user_id=user_id,
        reply_to=context.get("id"),
        media=media,
        raw=msg,
    )


def _status(st: dict[str, Any]) -> Status:
    errors = [e for e in st.get("errors") or [] if isinstance(e, dict)]
    codes = tuple(int(e["code"]) for e in errors if str(e.get("code", "")).isdigit())
    error = "; ".join(str(e.get("title") or e.get("message") or "") for e in errors)
    try:
        at = float(st.get("timestamp") or 0)
    except ValueError:
        at = 0.0
    return Status(
        wamid=st["id"],
        wa_id=str(st.get("recipient_id") or ""),
        status=str(st.get("status") or ""),
        timestamp=at,
        error_codes=codes,
        error=error,
    )

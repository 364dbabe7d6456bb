"""What a mail says, read from its bytes (pure): who sent it, the thread it belongs to, only
its new part as text, its attachments, whether it is an automatic mail, and whether the
receiving server authenticated its sender.

- **The new part**: the text part (or the HTML part as text, through ``inscriptis``), with
  quoted history and signatures stripped by ``mail-parser-reply``.
- **The thread**: the Message-ID of its first mail, the first of ``References`` (else
  ``In-Reply-To``, else its own). The bot's replies carry the whole chain in ``References``,
  so an answer to one finds its thread.
- **Automatic mail** (RFC 3834): ``Auto-Submitted`` other than ``no``, ``Precedence: bulk``,
  ``list`` or ``junk``, a mailing list's ``List-Id``, the ``X-Autoreply`` or
  ``X-Autorespond`` some responders set instead, or a sender such as ``mailer-daemon@`` or
  ``noreply@``: never answered, so two auto-responders cannot talk forever.
- **Authenticated**: only the topmost ``Authentication-Results`` is the receiving server's
  (those below it came with the mail, and a sender may write them); it must say
  ``dkim=pass`` with ``header.d`` the From domain (or a parent of it), or ``spf=pass`` for an
  envelope sender of that domain.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage, Message
from email.utils import getaddresses, parseaddr
from typing import Any

import authres
from inscriptis import get_text
from mailparser_reply import EmailReplyParser

from hub import MediaPart

from ._settings import address_of

__all__ = ["Inbound", "Unreadable", "read_mail", "message_ids", "attachments", "CHAT", "OUTPUT"]

CHAT = "email:thread"
OUTPUT = "email:reply"
_MSG_ID = re.compile(r"<([^<>\s]+)>")
_AUTO_PRECEDENCE = ("bulk", "list", "junk")
_AUTO_HEADERS = ("List-Id", "X-Autoreply", "X-Autorespond")
_AUTO_SENDERS = ("mailer-daemon", "postmaster", "noreply", "no-reply", "donotreply", "do-not-reply")


class Unreadable(ValueError):
    """A mail this extension cannot read (no sender, not a mail at all)."""


def message_ids(value: Any) -> list[str]:
    """The Message-IDs in a header's value, without their angle brackets, in order."""
    return _MSG_ID.findall(str(value or ""))


@dataclass(frozen=True, slots=True)
class Inbound:
    """A mail, as the intake needs it. ``message_id`` has no angle brackets."""

    message_id: str
    sender: str
    name: str
    reply_to: str
    subject: str
    text: str
    references: tuple[str, ...]
    in_reply_to: str
    auto: str = ""
    """Why it is an automatic mail ("Auto-Submitted: auto-replied"), or ""."""
    authenticated: bool = False
    auth_reason: str = ""
    media: tuple[MediaPart, ...] = field(default=())

    @property
    def platform_id(self) -> str:
        """The inbox's id of the mail: a mail read again (a restart before it was flagged
        ``\\Seen``, a new UIDVALIDITY) is recorded, and answered, once."""
        return f"email:{self.message_id}"

    @property
    def root(self) -> str:
        """The first mail of its thread as the mail itself says it."""
        if self.references:
            return self.references[0]
        return self.in_reply_to or self.message_id

    def meta(self, thread: str) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "from": self.sender,
            "name": self.name,
            "reply_to": self.reply_to,
            "subject": self.subject,
            "references": list(self.references),
            "thread": thread,
        }


def parse(raw: bytes) -> EmailMessage:
    msg = message_from_bytes(raw, policy=policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


def read_mail(raw: bytes, *, ref: str) -> Inbound:
    """``raw`` as an `Inbound`; its attachments are referenced as ``ref`` + ``/`` + their
    index (what `attachments()` gives the bytes of).

    Raises:
        Unreadable: it has no sender address.
    """
    msg = parse(raw)
    name, sender = parseaddr(str(msg.get("From", "")))
    sender = address_of(sender)
    if not sender:
        raise Unreadable(f"the mail has no sender address (From: {str(msg.get('From', ''))[:80]!r})")
    ids = message_ids(msg.get("Message-ID"))
    message_id = ids[0] if ids else f"sha256-{hashlib.sha256(raw).hexdigest()[:32]}@hub.invalid"
    reply_to = [address_of(a) for _, a in getaddresses([str(v) for v in msg.get_all("Reply-To", [])])]
    in_reply_to = message_ids(msg.get("In-Reply-To"))
    authenticated, why = authenticated_sender(msg, sender)
    media = tuple(
        MediaPart(kind=_kind(mime), ref=f"{ref}/{i}", mime=mime, size=len(data), name=fname)
        for i, (fname, mime, data) in enumerate(attachments(msg))
    )
    return Inbound(
        message_id=message_id,
        sender=sender,
        name=name.strip(),
        reply_to=next((a for a in reply_to if a), sender),
        subject=" ".join(str(msg.get("Subject", "")).split()),
        text=new_part(msg),
        references=tuple(message_ids(msg.get("References"))),
        in_reply_to=in_reply_to[0] if in_reply_to else "",
        auto=automatic(msg, sender),
        authenticated=authenticated,
        auth_reason=why,
        media=media,
    )


def new_part(msg: EmailMessage) -> str:
    """The text the sender wrote in this mail: the plain part (else the HTML part as text),
    without the quoted mails below it and the signature."""
    body = msg.get_body(preferencelist=("plain", "html"))
    if body is None:
        return ""
    try:
        content = body.get_content()
    except (LookupError, ValueError):  # an unknown charset: the bytes as far as they go
        payload = body.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else str(payload or "")
    text = str(content)
    if body.get_content_subtype() == "html":
        text = get_text(text)
    text = text.replace("\r\n", "\n").strip()
    if not text:
        return ""
    replies = EmailReplyParser(languages=["en"]).read(text).replies
    latest = replies[0].body if replies else text
    return latest.strip() or text


def attachments(msg: Message) -> list[tuple[str, str, bytes]]:
    """The files attached to ``msg``: (name, type, bytes), in order."""
    out: list[tuple[str, str, bytes]] = []
    if not isinstance(msg, EmailMessage):
        return out
    for part in msg.iter_attachments():
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes):
            continue
        out.append((str(part.get_filename() or ""), part.get_content_type(), data))
    return out


def automatic(msg: Message, sender: str = "") -> str:
    """Why ``msg`` (from ``sender``) is an automatic mail (an auto-reply, a list's), or ""."""
    auto = str(msg.get("Auto-Submitted", "")).strip().lower()
    if auto and not auto.startswith("no"):
        return f"Auto-Submitted: {auto}"
    precedence = str(msg.get("Precedence", "")).strip().lower()
    if precedence in _AUTO_PRECEDENCE:
        return f"Precedence: {precedence}"
    for name in _AUTO_HEADERS:
        if msg.get(name) is not None:
            return f"{name}: {str(msg.get(name)).strip()[:60]}"
    if sender.partition("@")[0] in _AUTO_SENDERS:
        return f"sent by {sender}"
    return ""


def _aligned(domain: str, sender_domain: str) -> bool:
    domain = domain.lower().rstrip(".")
    return bool(domain) and (sender_domain == domain or sender_domain.endswith("." + domain))


def authenticated_sender(msg: Message, sender: str) -> tuple[bool, str]:
    """Whether the receiving server's ``Authentication-Results`` (the topmost) vouches for
    ``sender``'s domain, and why (or why not)."""
    headers = msg.get_all("Authentication-Results") or []
    if not headers:
        return False, "it has no Authentication-Results header"
    sender_domain = sender.rpartition("@")[2]
    try:
        parsed = authres.AuthenticationResultsHeader.parse_value(str(headers[0]))
    except Exception as e:  # authres raises its own syntax errors, and others on odd input
        return False, f"its Authentication-Results cannot be read ({type(e).__name__})"
    for result in parsed.results:
        if str(result.result).lower() != "pass":
            continue
        props = {(p.type, p.name): str(p.value) for p in result.properties}
        method = str(result.method).lower()
        if method == "dkim" and _aligned(props.get(("header", "d"), ""), sender_domain):
            return True, "dkim=pass"
        if method == "spf":
            envelope = props.get(("smtp", "mailfrom"), "")
            if _aligned(envelope.rpartition("@")[2], sender_domain):
                return True, "spf=pass"
    return False, f"its Authentication-Results has no dkim=pass or spf=pass for {sender_domain}"


def _kind(mime: str) -> str:
    main = mime.split("/", 1)[0]
    return {"image": "image", "audio": "audio", "video": "video"}.get(main, "document")

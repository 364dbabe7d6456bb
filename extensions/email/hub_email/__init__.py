"""Email (IMAP in, SMTP out): context ``email:thread`` (one thread, by the Message-ID of its
first mail), input ``email:imap``, output ``email:reply``.

The bot reads one folder of its mailbox (``aioimaplib``): new mail by UID, awaited with
IDLE or by polling; each mail is recorded in the hub's inbox (``platform_id =
"email:<Message-ID>"``) before it is flagged ``\\Seen`` and the UID cursor passes it, so a
crash never loses one and nothing is answered twice. Only the new part of a mail reaches the
model (quoted history and signatures stripped, HTML as text); its attachments are media
under the hub's caps. The bot's reply (``aiosmtplib``) goes to the sender (or Reply-To),
``Re: subject``, with ``In-Reply-To`` and ``References`` set so it lands in the thread.
A mail whose subject is ``/new``, ``/stop`` or ``/help`` is that command.

Modules: ``_settings`` (the config table), ``_mail`` (a mail read: pure), ``_imap`` (the
mailbox over IMAP), ``_smtp`` (mail out, and the reply's headers), ``_intake`` (a mail into
the hub: access, automatic mail, the inbox), ``_cursor`` (the UID cursor, only ever forward), ``_reader`` (the IDLE loop).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from hub import Context, Extension, Input, MediaError, MediaPart, RunContext, Service, output
from hub.platform import SendFailed, quiet_loggers, reply_target

from ._cursor import CURSOR_KEY, Cursor, Cursors
from ._imap import ImapError, LoginRefused, Mailbox
from ._intake import PARK_AFTER, THREAD_KEY, Intake
from ._mail import CHAT, OUTPUT, Inbound, Unreadable, attachments, parse, read_mail
from ._reader import Reader
from ._settings import EmailSettings, EmailThread
from ._smtp import Outbox, build_reply, reply_subject

if TYPE_CHECKING:
    from hub import Hub

__all__ = [
    "EmailSettings",
    "EmailThread",
    "EmailStartError",
    "Inbound",
    "Unreadable",
    "read_mail",
    "build_reply",
    "reply_subject",
    "ReplyAttributes",
    "extension",
    "CURSOR_KEY",
    "Cursor",
    "Cursors",
    "THREAD_KEY",
    "PARK_AFTER",
]

log = logging.getLogger("hub_email")

_INSTRUCTIONS = (
    "This conversation is an email thread with one person. Write a plain-text email body: no "
    "Markdown tables or headings, no subject line and no signature block (they are added for you). "
    "Each input is the new part of their latest mail; what they quoted is left out."
)


class EmailStartError(Exception):
    """The IMAP server refused the login or could not be reached; ``hub run`` stops with this line."""


class ReplyAttributes(BaseModel):
    """``email:reply``'s attribute: files to attach."""

    attach: str = Field("", description="files to attach, comma-separated: media handles from action results (media:1)")


class _Email:
    """The service, the input and the output of one mailbox."""

    def __init__(self, settings: EmailSettings, tls_context: ssl.SSLContext | None) -> None:
        self.settings = settings
        self.tls_context = tls_context
        self.outbox = Outbox(settings, tls_context=tls_context)

    async def start(self, hub: Hub) -> None:
        """Log in once, within ``ready_timeout``: a refused password stops ``hub run`` with one line."""
        self.outbox.governor.report_to(hub)
        box = Mailbox(self.settings, tls_context=self.tls_context)
        try:
            async with asyncio.timeout(self.settings.ready_timeout):
                await box.connect()
                await box.select()
        except TimeoutError as e:
            raise EmailStartError(
                f"{self.settings.imap_host} did not answer within {self.settings.ready_timeout:g}s (ready_timeout)"
            ) from e
        except LoginRefused as e:
            raise EmailStartError(f"{e}: check username and EMAIL_PASSWORD") from e
        except ImapError as e:
            raise EmailStartError(str(e)) from e
        finally:
            await box.close()
        log.info("email: reading %s of %s on %s", self.settings.folder, self.settings.address, self.settings.imap_host)

    async def stop(self) -> None:
        return None

    async def subscribe(self, send: Any, hub: Hub) -> Any:
        """Read the folder on the one worker holding the lease ``email:imap:<address>``."""
        intake = Intake(self.settings, hub, send, self.outbox)
        reader = Reader(self.settings, intake, hub, tls_context=self.tls_context)
        keeper = hub.lease(f"email:imap:{self.settings.address}", ttl=self.settings.lease_ttl)
        task = hub.create_task(keeper.hold(reader.run), name="email:imap")

        async def stop() -> None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        return stop

    async def send(self, content: str, ctx: RunContext) -> dict[str, Any]:
        """The reply to the thread's newest mail (the one this run answers, else the newest
        known), with the files ``attach`` names.

        Raises:
            SendFailed: no mail of the thread is known, or the SMTP server refused it.
        """
        thread = str(ctx.context.args.thread)
        target = reply_target(ctx, "message_id", where={"thread": thread})
        if target is None:
            target = await ctx.hub.memory.get(THREAD_KEY + thread)
        if not isinstance(target, dict) or not target.get("message_id"):
            raise SendFailed("email", thread, "no mail of this thread is known: there is nobody to reply to")
        attrs = ctx.attributes
        attach = attrs.attach if isinstance(attrs, ReplyAttributes) else ""
        files = [await ctx.media.resolve(n.strip()) for n in attach.split(",") if n.strip()]
        to = str(target.get("reply_to") or target.get("from"))
        if not content.strip() and not files:
            return {"thread": thread, "to": to, "message_id": None, "reply_to": target["message_id"]}
        msg = build_reply(
            self.settings,
            to=to,
            subject=str(target.get("subject") or ""),
            text=content,
            in_reply_to=str(target["message_id"]),
            references=[str(r) for r in target.get("references") or []],
            files=files,
        )
        message_id = await self.outbox.send(msg)
        await ctx.part_sent(0, message_id)  # durable: a restart will not send it again
        return {"thread": thread, "to": to, "message_id": message_id, "reply_to": target["message_id"]}

    async def fetch(self, part: MediaPart, max_bytes: int) -> bytes:
        """An attachment's bytes, read again from the mailbox (``<uidvalidity>/<uid>/<index>``)."""
        try:
            validity, uid, index = (int(x) for x in part.ref.split("/"))
        except ValueError as e:
            raise MediaError(f"{part.ref!r} is not an attachment of this mailbox", name=part.name) from e
        if part.size is not None and part.size > max_bytes:
            raise MediaError(f"it is {part.size} bytes, over the limit of {max_bytes}", name=part.name)
        box = Mailbox(self.settings, tls_context=self.tls_context)
        try:
            await box.connect()
            current, _ = await box.select()
            raw = await box.fetch(uid) if current == validity else None
        except ImapError as e:
            raise MediaError(f"the mailbox could not be read: {e}", name=part.name) from e
        finally:
            await box.close()
        files = attachments(parse(raw)) if raw is not None else []
        if index >= len(files):
            raise MediaError("its mail is no longer in the folder", name=part.name)
        data = files[index][2]
        if len(data) > max_bytes:
            raise MediaError(f"it is {len(data)} bytes, over the limit of {max_bytes}", name=part.name)
        return data


def extension(settings: EmailSettings, *, tls_context: ssl.SSLContext | None = None) -> Extension:
    """The email extension for ``[extensions.email]``. ``tls_context``: the TLS settings for
    IMAP and SMTP (default: the system's trusted certificates; tests pass their own CA).
    Nothing connects until the hub starts."""
    quiet_loggers("aioimaplib", "aiosmtplib")
    mail = _Email(settings, tls_context)
    thread: Context[EmailThread, dict[str, Any]] = Context(
        type=CHAT,
        schema=EmailThread,
        key=lambda a: a.thread,
        description="An email thread with one person, keyed by the Message-ID of its first mail.",
        instructions=_INSTRUCTIONS,
        reply_output=OUTPUT,
    )
    reply = output(
        type=OUTPUT,
        context=CHAT,
        attributes=ReplyAttributes,
        description="Reply by email in this thread, with files if attach names them.",
        instructions='Plain text, any length. attach="media:1" attaches a file an action returned.',
    )(mail.send)
    return Extension(
        name="email",
        contexts=[thread],
        outputs=[reply],
        inputs=[
            Input(
                type="email:imap",
                subscribe=mail.subscribe,
                description="Mail to the bot's address (IMAP).",
                fetch=mail.fetch,
            )
        ],
        services=[Service(name="email", start=mail.start, stop=mail.stop)],
        description="Email: IMAP in (IDLE), SMTP out, one conversation per thread.",
    )

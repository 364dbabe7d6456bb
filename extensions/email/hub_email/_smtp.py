"""Mail out through SMTP (``aiosmtplib``), paced and retried by a
[`Governor`][hub.platform.Governor]; and the reply itself: ``Re: subject``, ``In-Reply-To`` and
``References`` set so that the user's mail program shows it in the thread, and
``Auto-Submitted: auto-replied`` (RFC 3834) so that other robots do not answer it.

SMTP's answers map onto the governor's: a 4xx (greylisting, a full queue) and a lost
connection are retried; a 5xx (a refused recipient, a refused login) is final.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from email.message import EmailMessage
from email.utils import formataddr, formatdate, make_msgid

import aiosmtplib

from hub import MediaFile
from hub.platform import Governor, PermanentSendError, RateLimit, TransientSendError

from ._settings import EmailSettings

__all__ = ["Outbox", "reply_subject", "build_reply", "MAX_REFERENCES"]

MAX_REFERENCES = 20
"""Message-IDs a reply's References keeps: the first (the thread's root) and the latest."""


def reply_subject(subject: str) -> str:
    """``Re: subject``, once: a subject that starts with ``Re:`` already is kept."""
    subject = subject.strip() or "(no subject)"
    return subject if subject.lower().startswith("re:") else f"Re: {subject}"


def build_reply(
    settings: EmailSettings,
    *,
    to: str,
    subject: str,
    text: str,
    in_reply_to: str | None,
    references: Sequence[str],
    files: Sequence[MediaFile] = (),
    name: str = "",
) -> EmailMessage:
    """The bot's mail; its ``Message-ID`` is set (without it no thread could follow it)."""
    msg = EmailMessage()
    msg["From"] = formataddr((name, settings.address)) if name else settings.address
    msg["To"] = to
    msg["Subject"] = reply_subject(subject) if in_reply_to else (subject.strip() or "(no subject)")
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = make_msgid(domain=settings.domain)
    refs = [r for r in references if r]
    if in_reply_to:
        msg["In-Reply-To"] = f"<{in_reply_to}>"
        if in_reply_to not in refs:
            refs.append(in_reply_to)
    if refs:
        kept = refs if len(refs) <= MAX_REFERENCES else [refs[0], *refs[-(MAX_REFERENCES - 1) :]]
        msg["References"] = " ".join(f"<{r}>" for r in kept)
    msg["Auto-Submitted"] = "auto-replied"
    msg.set_content(text or " ")
    for f in files:
        maintype, _, subtype = (f.mime or "application/octet-stream").partition("/")
        msg.add_attachment(f.data, maintype=maintype, subtype=subtype or "octet-stream", filename=f.name or "file")
    return msg


class Outbox:
    """Sends the bot's mail through the configured SMTP server."""

    def __init__(self, settings: EmailSettings, *, tls_context: ssl.SSLContext | None = None) -> None:
        self.settings = settings
        self.tls_context = tls_context
        self.governor = Governor(
            "email",
            per_chat=None,
            global_=RateLimit(*settings.rate),
            max_attempts=settings.send_attempts,
            max_wait=settings.send_max_wait,
        )

    async def send(self, msg: EmailMessage) -> str:
        """``msg`` to its ``To``; its Message-ID (without brackets).

        Raises:
            SendFailed: the server refused it, or could not be reached in all attempts.
        """
        s = self.settings
        to = str(msg["To"])

        async def once() -> str:
            try:
                await aiosmtplib.send(
                    msg,
                    hostname=s.smtp_host,
                    port=s.smtp_port,
                    username=s.username,
                    password=s.password.get_secret_value(),
                    use_tls=s.tls == "implicit",
                    start_tls=s.tls == "starttls",
                    tls_context=self.tls_context,
                    timeout=s.timeout,
                )
            except aiosmtplib.SMTPResponseException as e:
                what = f"{e.code} {e.message}"
                if 400 <= e.code < 500:
                    raise TransientSendError(f"the SMTP server deferred it ({what})") from e
                raise PermanentSendError(f"the SMTP server refused it ({what})") from e
            except aiosmtplib.SMTPRecipientsRefused as e:
                codes = [r.code for r in e.recipients]
                what = "; ".join(f"{r.code} {r.message}" for r in e.recipients)
                if codes and all(c >= 500 for c in codes):
                    raise PermanentSendError(f"the SMTP server refused the recipient ({what})") from e
                raise TransientSendError(f"the SMTP server deferred the recipient ({what})") from e
            except aiosmtplib.SMTPNotSupported as e:
                raise PermanentSendError(f"the SMTP server cannot do it: {e}") from e
            except (aiosmtplib.SMTPException, OSError, TimeoutError) as e:
                raise TransientSendError(f"{type(e).__name__}: {e}") from e
            return str(msg["Message-ID"]).strip().strip("<>")

        return await self.governor.send(to, once)

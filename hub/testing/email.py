"""Real mail servers on loopback, for the email extension's tests and its quick start.

- `Dovecot`: Debian's ``dovecot-imapd`` (``/usr/sbin/dovecot``) started in a
  temporary folder: ``passwd-file`` auth, maildir, ``127.0.0.1`` on a free port, ``ssl =
  no``, a short ``base_dir`` (unix socket paths are limited to 108 bytes). Mail reaches the
  bot's mailbox by IMAP ``APPEND`` (`Dovecot.deliver()`), as a delivery agent would put it
  there; the test then watches the mailbox's flags as the extension leaves them.
- `SmtpSink`: ``aiosmtpd``'s real SMTP server on a free port, with ``AUTH`` (over
  plain text: loopback only), keeping every message the bot sends.
- `mail()`: a test mail as bytes, with the headers a real one carries.

Run it alone for the quick start: ``python -m hub.testing.email --imap-port 1143
--smtp-port 1025`` starts both; each line typed on its standard input is mailed to the bot,
and each mail the bot sends is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import imaplib
import logging
import os
import pwd
import shutil
import signal
import socket
import ssl
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path
from typing import Any

from .processes import end_program

__all__ = [
    "Dovecot",
    "SmtpSink",
    "Sent",
    "mail",
    "BOT",
    "PASSWORD",
    "USER",
    "DOVECOT",
]

DOVECOT = "/usr/sbin/dovecot"
BOT = "bot@example.org"
PASSWORD = "fake-mail-password-0123456789"
USER = "alice@example.com"


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mail(
    text: str | None = "hello",
    *,
    sender: str = USER,
    to: str = BOT,
    subject: str = "Hello",
    message_id: str | None = None,
    in_reply_to: str | None = None,
    references: Sequence[str] = (),
    html: str | None = None,
    attachments: Sequence[tuple[str, str, bytes]] = (),
    authenticated: bool | None = True,
    headers: dict[str, str] | None = None,
) -> tuple[bytes, str]:
    """A mail from ``sender`` to ``to`` and its Message-ID. ``authenticated``: True puts the
    receiving server's ``Authentication-Results: ... dkim=pass`` for the sender's domain on
    top, False a ``dkim=fail``, None none at all. ``attachments``: (name, mime, bytes);
    ``html`` with ``text=None``: an HTML-only mail, else the alternative to the text."""
    msg = EmailMessage()
    domain = sender.rsplit("@", 1)[-1]
    if authenticated is not None:
        verdict = "pass" if authenticated else "fail"
        msg["Authentication-Results"] = f"mx.example.org; dkim={verdict} header.d={domain}; spf=none"
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Date"] = formatdate(localtime=False)
    msg_id = message_id or make_msgid(domain=domain)
    msg["Message-ID"] = msg_id
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
    if references:
        msg["References"] = " ".join(references)
    for name, value in (headers or {}).items():
        msg[name] = value
    if text is None:
        msg.set_content(html or "", subtype="html")
    else:
        msg.set_content(text)
        if html is not None:
            msg.add_alternative(html, subtype="html")
    for name, mime, data in attachments:
        maintype, subtype = mime.split("/", 1)
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return msg.as_bytes(policy=policy.SMTP), msg_id


class Dovecot:
    """A Dovecot IMAP server of its own, in a temporary folder, for one mailbox (``user``)."""

    def __init__(
        self,
        *,
        user: str = BOT,
        password: str = PASSWORD,
        port: int = 0,
        cert: tuple[bytes, bytes] | None = None,
        capability: str | None = None,
    ) -> None:
        """``cert``: a certificate chain and its key (PEM): TLS is then offered, by STARTTLS on
        `port` and from the first byte on `tls_port`. ``capability``: what the
        server says it can do after the login, instead of Dovecot's list (a server without
        IDLE: ``"IMAP4rev1 UIDPLUS"``)."""
        if not os.path.exists(DOVECOT):
            raise RuntimeError(f"{DOVECOT} is missing: apt-get install dovecot-imapd")
        self.user = user
        self.password = password
        self.port = port or _free_port()
        self.host = "127.0.0.1"
        self.cert = cert
        self.capability = capability
        self.tls_port = _free_port() if cert else 0
        # base_dir holds unix sockets (108 bytes at most): a short folder of its own
        self.dir = Path(tempfile.mkdtemp(prefix="dv", dir="/tmp"))
        self._proc: asyncio.subprocess.Process | None = None

    def _config(self) -> str:
        d = self.dir
        if os.getuid() == 0:  # Dovecot will not run its logins or a mailbox as root
            owner = pwd.getpwnam("nobody")
            login, internal = "dovenull", "dovecot"
        else:
            owner = pwd.getpwuid(os.getuid())
            login = internal = owner.pw_name
        d.chmod(0o755)  # Dovecot's auth process (another user when root) reads the passwd file
        (d / "mail").mkdir(exist_ok=True)
        os.chown(d / "mail", owner.pw_uid, owner.pw_gid)
        (d / "passwd").write_text(f"{self.user}:{{PLAIN}}{self.password}::::::\n")
        ssl = "ssl = no"
        if self.cert is not None:
            (d / "cert.pem").write_bytes(self.cert[0])
            (d / "key.pem").write_bytes(self.cert[1])
            ssl = f"ssl = yes\nssl_cert = <{d}/cert.pem\nssl_key = <{d}/key.pem"
        if self.capability is not None:
            ssl += f"\nimap_capability = {self.capability}"
        return f"""
base_dir = {d}/run
state_dir = {d}/state
log_path = {d}/dovecot.log
protocols = imap
listen = 127.0.0.1
{ssl}
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:{d}/mail/%n
default_login_user = {login}
default_internal_user = {internal}
first_valid_uid = {min(owner.pw_uid, 500)}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {d}/passwd
}}
userdb {{
  driver = static
  args = uid={owner.pw_uid} gid={owner.pw_gid} home={d}/mail/%n
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {self.tls_port}
  }}
}}
"""

    async def start(self) -> Dovecot:
        conf = self.dir / "dovecot.conf"
        conf.write_text(self._config())
        self._proc = await asyncio.create_subprocess_exec(
            DOVECOT, "-F", "-c", str(conf), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        async with asyncio.timeout(15):
            while True:
                if self._proc.returncode is not None:
                    raise RuntimeError(f"dovecot exited ({self._proc.returncode}): {self.log()}")
                with contextlib.suppress(OSError):
                    _, writer = await asyncio.open_connection(self.host, self.port)
                    writer.close()
                    return self
                await asyncio.sleep(0.02)

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            await end_program(proc, terminate=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    async def __aenter__(self) -> Dovecot:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def log(self) -> str:
        path = self.dir / "dovecot.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- the mailbox, as another IMAP client sees it ------------------------------------------

    def _session(self) -> imaplib.IMAP4:
        m = imaplib.IMAP4(self.host, self.port, timeout=10)
        m.login(self.user, self.password)
        return m

    def _run(self, fn: Any) -> Any:
        m = self._session()
        try:
            return fn(m)
        finally:
            with contextlib.suppress(Exception):
                m.logout()

    async def deliver(self, raw: bytes, *, folder: str = "INBOX", seen: bool = False) -> int:
        """Put ``raw`` in ``folder`` (unseen unless ``seen``); its UID."""

        def append(m: imaplib.IMAP4) -> int:
            typ, data = m.append(folder, r"(\Seen)" if seen else None, None, raw)
            if typ != "OK":
                raise RuntimeError(f"APPEND to {folder} failed: {data!r}")
            # [APPENDUID <uidvalidity> <uid>]
            code = data[0].decode() if isinstance(data[0], bytes) else str(data[0])
            return int(code.split("APPENDUID", 1)[1].split()[1].rstrip("]"))

        return int(await asyncio.to_thread(self._run, append))

    async def seen(self, *, folder: str = "INBOX") -> list[int]:
        """The UIDs flagged ``\\Seen`` in ``folder``."""

        def search(m: imaplib.IMAP4) -> list[int]:
            m.select(folder, readonly=True)
            _, data = m.uid("SEARCH", "SEEN")
            return [int(x) for x in (data[0] or b"").split()]

        return list(await asyncio.to_thread(self._run, search))

    async def recreate(self, folder: str) -> None:
        """Delete ``folder`` and create it anew: it gets a new UIDVALIDITY, and UIDs start at 1."""

        def again(m: imaplib.IMAP4) -> None:
            m.delete(folder)
            typ, data = m.create(folder)
            if typ != "OK":
                raise RuntimeError(f"CREATE {folder} failed: {data!r}")

        await asyncio.to_thread(self._run, again)

    async def create(self, folder: str) -> None:
        await asyncio.to_thread(self._run, lambda m: m.create(folder))


@dataclass
class Sent:
    """A message the SMTP server took: its envelope and the parsed mail."""

    sender: str
    recipients: list[str]
    message: EmailMessage
    login: str | None

    @property
    def text(self) -> str:
        body = self.message.get_body(preferencelist=("plain",))
        return str(body.get_content()).strip() if body is not None else ""


class SmtpSink:
    """``aiosmtpd``'s SMTP server on 127.0.0.1, in this event loop, with ``AUTH PLAIN`` and
    ``LOGIN`` checked against ``user``/``password``; keeps what it is sent."""

    def __init__(
        self,
        *,
        user: str = BOT,
        password: str = PASSWORD,
        port: int = 0,
        tls: ssl.SSLContext | None = None,
        implicit: bool = False,
    ) -> None:
        """``tls``: the server's TLS context; with ``implicit`` TLS from the first byte, else
        offered by STARTTLS (and then required before AUTH)."""
        self.user = user
        self.tls = tls
        self.implicit = implicit
        self.password = password
        self.port = port or _free_port()
        self.host = "127.0.0.1"
        self.sent: list[Sent] = []
        self.refuse: int = 0  # the next so many messages are answered 451 (a temporary failure)
        self._server: asyncio.Server | None = None
        self._changed: asyncio.Event | None = None

    async def start(self) -> SmtpSink:
        from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

        sink = self

        def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
            ok = (
                isinstance(data, LoginPassword)
                and data.login.decode() == sink.user
                and data.password.decode() == sink.password
            )
            return AuthResult(success=ok, auth_data=data.login.decode() if ok else None)

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                if sink.refuse > 0:
                    sink.refuse -= 1
                    return "451 4.3.0 try again later"
                message = message_from_bytes(envelope.content, policy=policy.default)
                assert isinstance(message, EmailMessage)
                login = session.auth_data if session.authenticated else None
                sink.sent.append(Sent(envelope.mail_from, list(envelope.rcpt_tos), message, login))
                if sink._changed is not None:
                    sink._changed.set()
                return "250 OK"

        loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()

        def server() -> SMTP:
            with warnings.catch_warnings():  # AUTH without TLS: on loopback, on purpose
                warnings.simplefilter("ignore")
                return SMTP(
                    Handler(),
                    hostname="mx.test",
                    authenticator=authenticator,
                    auth_required=True,
                    auth_require_tls=self.tls is not None and not self.implicit,
                    tls_context=None if self.implicit else self.tls,
                    require_starttls=self.tls is not None and not self.implicit,
                    loop=loop,
                )

        logging.getLogger("mail.log").setLevel(logging.ERROR)  # the same warning, and each session
        self._server = await loop.create_server(server, self.host, self.port, ssl=self.tls if self.implicit else None)
        return self

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await server.wait_closed()

    async def __aenter__(self) -> SmtpSink:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_sent(self, count: int, *, timeout: float = 10.0) -> list[Sent]:
        """Until at least ``count`` messages were sent; they all."""
        assert self._changed is not None
        async with asyncio.timeout(timeout):
            while len(self.sent) < count:
                self._changed.clear()
                await self._changed.wait()
        return list(self.sent)


async def _main(imap_port: int, smtp_port: int) -> None:  # pragma: no cover - the quick start's program
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    loop.add_signal_handler(signal.SIGTERM, main.cancel)  # stopped by SIGTERM: Dovecot is stopped too
    async with Dovecot(port=imap_port) as dovecot, SmtpSink(port=smtp_port) as smtp:
        print(f"IMAP (Dovecot) on 127.0.0.1:{imap_port}, SMTP on 127.0.0.1:{smtp_port}", flush=True)
        print(f"type a line: it is mailed from {USER} to {BOT}", flush=True)
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb"))
        shown = 0
        thread: list[str] = []  # the Message-IDs so far: each typed line answers the newest

        async def show() -> None:
            nonlocal shown
            while True:
                await smtp.wait_sent(shown + 1, timeout=10**9)
                for s in smtp.sent[shown:]:
                    thread.append(str(s.message["Message-ID"]))
                    print(f"bot -> {', '.join(s.recipients)}: [{s.message['Subject']}] {s.text}", flush=True)
                shown = len(smtp.sent)

        shower = asyncio.create_task(show())
        try:
            while line := await reader.readline():
                text = line.decode().strip()
                if not text:
                    continue
                subject = text if text.startswith("/") else ("Re: Hello" if thread else "Hello")
                raw, msg_id = mail(
                    text, subject=subject, in_reply_to=thread[-1] if thread else None, references=list(thread)
                )
                thread.append(msg_id)
                uid = await dovecot.deliver(raw)
                print(f"delivered: UID {uid}, {msg_id}", flush=True)
        finally:
            shower.cancel()


if __name__ == "__main__":  # pragma: no cover
    import argparse

    parser = argparse.ArgumentParser(description="Dovecot and an SMTP server on loopback, for hub-email.")
    parser.add_argument("--imap-port", type=int, default=1143)
    parser.add_argument("--smtp-port", type=int, default=1025)
    ns = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
        asyncio.run(_main(ns.imap_port, ns.smtp_port))

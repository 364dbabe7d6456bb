"""The bot's mailbox over IMAP (``aioimaplib``): log in, select the folder (its UIDVALIDITY
and UIDNEXT), find mail by UID, fetch it without marking it read (``BODY.PEEK[]``), flag it
``\\Seen`` once it is recorded, and wait for new mail with IDLE (or by polling, where the
server has no IDLE).

aioimaplib speaks implicit TLS; ``STARTTLS`` it lists but does not carry out, so
`Mailbox._starttls()` upgrades its connection with asyncio's ``start_tls`` after the
server's go-ahead, as RFC 3501 6.2.1 describes, and asks for the capabilities again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
from typing import Any

import aioimaplib
from aioimaplib.aioimaplib import Command

from ._settings import EmailSettings

__all__ = ["Mailbox", "ImapError", "LoginRefused", "quoted"]

log = logging.getLogger("hub_email")

_CODE = re.compile(rb"\[(UIDVALIDITY|UIDNEXT) (\d+)\]")
_FETCH_UID = re.compile(rb"UID (\d+)")


class ImapError(Exception):
    """The IMAP server refused a command or could not be reached."""


class LoginRefused(ImapError):
    """The server refused the username and password: no retry will change that."""


def quoted(name: str) -> str:
    """A folder name as an IMAP quoted string."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Mailbox:
    """One IMAP connection to the bot's folder."""

    def __init__(self, settings: EmailSettings, *, tls_context: ssl.SSLContext | None = None) -> None:
        self.settings = settings
        self.tls_context = tls_context
        self._client: aioimaplib.IMAP4 | None = None
        self.uidvalidity = 0
        self.uidnext = 0

    @property
    def client(self) -> aioimaplib.IMAP4:
        if self._client is None:
            raise ImapError("not connected")
        return self._client

    def _context(self) -> ssl.SSLContext:
        return self.tls_context or ssl.create_default_context()

    async def connect(self) -> None:
        """Connect, upgrade to TLS as ``tls`` says, log in.

        Raises:
            LoginRefused: the server refused the login.
            ImapError: the server could not be reached, or refused TLS.
        """
        s = self.settings
        try:
            if s.tls == "implicit":
                client: aioimaplib.IMAP4 = aioimaplib.IMAP4_SSL(
                    host=s.imap_host, port=s.imap_port, timeout=s.timeout, ssl_context=self._context()
                )
            else:
                client = aioimaplib.IMAP4(host=s.imap_host, port=s.imap_port, timeout=s.timeout)
            self._client = client
            await client.wait_hello_from_server()
            if s.tls == "starttls":
                await self._starttls(client)
            response = await client.login(s.username, s.password.get_secret_value())
        except (OSError, TimeoutError, aioimaplib.AioImapException) as e:
            await self.close()
            raise ImapError(f"cannot reach {s.imap_host}:{s.imap_port}: {type(e).__name__}: {e}") from e
        if response.result != "OK":
            await self.close()
            raise LoginRefused(f"{s.imap_host} refused the login of {s.username}: {_text(response)}")
        try:  # what the server offers after the login (IDLE among it) replaces what it said before
            await asyncio.wait_for(client.protocol.capability(), s.timeout)
        except (OSError, TimeoutError, aioimaplib.AioImapException) as e:
            await self.close()
            raise ImapError(f"CAPABILITY failed on {s.imap_host}: {type(e).__name__}: {e}") from e

    async def _starttls(self, client: aioimaplib.IMAP4) -> None:
        protocol = client.protocol
        if "STARTTLS" not in protocol.capabilities:
            raise ImapError(f'{self.settings.imap_host} does not offer STARTTLS (tls = "starttls")')
        command = Command("STARTTLS", protocol.new_tag(), loop=protocol.loop)
        response = await asyncio.wait_for(protocol.execute(command), self.settings.timeout)
        if response.result != "OK":
            raise ImapError(f"STARTTLS refused: {_text(response)}")
        loop = asyncio.get_running_loop()
        transport = await loop.start_tls(
            protocol.transport, protocol, self._context(), server_hostname=self.settings.imap_host
        )
        protocol.transport = transport
        protocol.capabilities = set()
        await asyncio.wait_for(protocol.capability(), self.settings.timeout)

    async def select(self) -> tuple[int, int]:
        """Select the folder: its UIDVALIDITY and UIDNEXT."""
        response = await self.client.select(quoted(self.settings.folder))
        if response.result != "OK":
            raise ImapError(f"the folder {self.settings.folder!r} cannot be selected: {_text(response)}")
        codes = {}
        for line in response.lines:
            if isinstance(line, bytes | bytearray):
                for name, value in _CODE.findall(bytes(line)):
                    codes[name] = int(value)
        if b"UIDVALIDITY" not in codes:
            raise ImapError(f"the server gave no UIDVALIDITY for {self.settings.folder!r}")
        self.uidvalidity = codes[b"UIDVALIDITY"]
        self.uidnext = codes.get(b"UIDNEXT", 0)
        return self.uidvalidity, self.uidnext

    async def search(self, *criteria: str) -> list[int]:
        """UIDs matching ``criteria`` (``UID 5:*``, ``UNSEEN``), ascending."""
        response = await self.client.uid_search(*criteria, charset=None)
        if response.result != "OK":
            raise ImapError(f"UID SEARCH {' '.join(criteria)} failed: {_text(response)}")
        uids: set[int] = set()
        for line in response.lines:
            if not isinstance(line, bytes | bytearray):
                continue
            text = bytes(line).decode("ascii", "replace").strip()
            if text.startswith("SEARCH"):
                text = text[len("SEARCH") :]
            if text and all(part.isdigit() for part in text.split()):
                uids.update(int(part) for part in text.split())
        return sorted(uids)

    async def after(self, uid: int) -> list[int]:
        """UIDs above ``uid`` (``N:*`` always matches the highest UID, even below N: filtered).
        A NOOP first: a session sees mail delivered since its last command only after one."""
        await self.client.noop()
        return [u for u in await self.search("UID", f"{uid + 1}:*") if u > uid]

    async def fetch(self, uid: int) -> bytes | None:
        """The mail ``uid`` whole, left unread; None when it is gone (expunged)."""
        response = await self.client.uid("fetch", str(uid), "(UID BODY.PEEK[])")
        if response.result != "OK":
            raise ImapError(f"UID FETCH {uid} failed: {_text(response)}")
        lines = response.lines
        for i, line in enumerate(lines):
            if isinstance(line, bytes) and b"FETCH" in line and b"BODY[]" in line and i + 1 < len(lines):
                literal = lines[i + 1]
                if isinstance(literal, bytes | bytearray):
                    return bytes(literal)
        return None

    async def mark_seen(self, uid: int) -> None:
        response = await self.client.uid("store", str(uid), "+FLAGS.SILENT", r"(\Seen)")
        if response.result != "OK":
            raise ImapError(f"UID STORE {uid} +FLAGS (\\Seen) failed: {_text(response)}")

    @property
    def has_idle(self) -> bool:
        return self._client is not None and self._client.has_capability("IDLE")

    async def wait(self, seconds: float) -> None:
        """Until the server says the folder changed (IDLE), or ``seconds`` pass; without
        IDLE, ``seconds`` of sleep and a NOOP (which keeps the connection alive, and fails
        when it is gone)."""
        client = self.client
        if not (self.settings.idle and self.has_idle):
            await asyncio.sleep(seconds)
            response = await client.noop()
            if response.result != "OK":
                raise ImapError(f"NOOP failed: {_text(response)}")
            return
        idle = await client.idle_start(timeout=seconds)
        try:
            while True:
                pushed = await client.wait_server_push(timeout=seconds + self.settings.timeout)
                if pushed == aioimaplib.STOP_WAIT_SERVER_PUSH:
                    break  # renewed: servers drop an IDLE after 30 minutes
                if isinstance(pushed, list) and any(
                    isinstance(p, bytes) and (p.endswith(b"EXISTS") or b"RECENT" in p or b"EXPUNGE" in p)
                    for p in pushed
                ):
                    break
        finally:
            if client.has_pending_idle():
                client.idle_done()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(idle), self.settings.timeout)
        if idle.done() and not idle.cancelled() and idle.exception() is not None:
            raise ImapError(f"IDLE failed: {idle.exception()}")

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        with contextlib.suppress(Exception):
            if client.get_state() in ("AUTH", "SELECTED"):
                await asyncio.wait_for(client.logout(), 5)
        transport = getattr(client.protocol, "transport", None)
        if transport is not None:
            transport.close()


def _text(response: Any) -> str:
    parts = []
    for line in getattr(response, "lines", [])[-2:]:
        if isinstance(line, bytes | bytearray):
            parts.append(bytes(line).decode("utf-8", "replace"))
    return " ".join(parts).strip() or str(getattr(response, "result", ""))

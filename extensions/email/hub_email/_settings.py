"""``[extensions.email]``: the settings, each with a default that works except the hosts,
the account and its password."""

from __future__ import annotations

import ipaddress
from email.utils import parseaddr
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from hub.platform import PlatformSettings

__all__ = ["EmailSettings", "EmailThread", "is_loopback", "address_of"]


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address: the only hosts ``tls = "none"`` may talk to."""
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def address_of(value: str) -> str:
    """The bare address of ``value`` (``Alice <Alice@Example.com>`` -> ``alice@example.com``),
    or "" when it is none."""
    _, addr = parseaddr(value)
    addr = addr.strip().lower()
    local, at, domain = addr.rpartition("@")
    return addr if at and local and "." in domain else ""


class EmailSettings(PlatformSettings):
    """What the operator may set under ``[extensions.email]``.

    ``dm_policy``, ``loop_guard_*`` and ``send_*`` are every platform's
    ([`hub.platform.PlatformSettings`][hub.platform.PlatformSettings]); every mail thread is a private conversation,
    so ``dm_policy`` applies to each. ``allowed_users`` is a synonym of ``allowed_senders``.
    """

    imap_host: str = Field("", validate_default=True)
    """The IMAP server the bot reads its mail from."""
    imap_port: int = Field(993, ge=1, le=65535)
    """993 for ``tls = "implicit"``, 143 for ``"starttls"``."""
    smtp_host: str = Field("", validate_default=True)
    """The SMTP server the bot sends through (its submission port)."""
    smtp_port: int = Field(465, ge=1, le=65535)
    """465 for ``tls = "implicit"``, 587 for ``"starttls"``."""
    tls: Literal["implicit", "starttls", "none"] = "implicit"
    """TLS from the first byte (``"implicit"``), upgraded after the greeting (``"starttls"``),
    or none at all (``"none"``: only to a loopback host, such as a local relay)."""
    username: str = Field("", validate_default=True)
    """The account's login, for IMAP and SMTP both."""
    password: SecretStr = Field(SecretStr(""), validate_default=True)
    """The account's password (or an app password): ``password = "${EMAIL_PASSWORD}"``."""
    address: str = ""
    """The bot's address: the From of its replies (empty: ``username``, when it is an address).
    Mail from it is never answered."""
    folder: str = "INBOX"
    """The folder watched for new mail."""
    allowed_senders: list[str] = Field(default_factory=list)
    """Addresses the bot answers, or whole domains as ``@example.org``; empty: anyone
    (``dm_policy`` applies as elsewhere)."""
    bots: list[str] = Field(default_factory=list)
    """Addresses of other bots that do not mark their mail as automatic: their mail counts
    against the loop guard (``loop_guard_turns`` answers per thread in ``loop_guard_window``)."""
    require_authenticated: bool = True
    """Answer only mail whose topmost ``Authentication-Results`` header (the receiving
    server's) says ``dkim=pass`` or ``spf=pass`` for the From address's domain: a forged
    sender is not answered."""
    poll_interval: float = Field(60.0, gt=0, le=3600)
    """Seconds between checks for new mail when the server has no IDLE; with IDLE, the most
    one IDLE lasts before it is renewed (servers drop one after 30 minutes)."""
    idle: bool = True
    """Wait for new mail with IMAP IDLE when the server offers it (else poll)."""
    timeout: float = Field(30.0, gt=0)
    """Seconds an IMAP command or an SMTP exchange may take."""
    ready_timeout: float = Field(30.0, gt=0)
    """Seconds ``hub run`` waits for the IMAP login at start."""
    lease_ttl: float = Field(30.0, gt=0)
    """With several workers, only the holder of the lease reads the mailbox."""
    rate: tuple[int, float] = (20, 60.0)
    """Mails per seconds the bot sends in all (providers cap a mailbox's sending)."""

    @field_validator("imap_host", "smtp_host")
    @classmethod
    def _host(cls, v: str, info: object) -> str:
        v = v.strip()
        name = getattr(info, "field_name", "host")
        if not v:
            raise ValueError(f'{name} is empty: the server\'s name, such as {name} = "{name[:4]}.example.org"')
        if "/" in v or (v.count(":") == 1 and not v.startswith("[")):
            raise ValueError(f"{name} is a host name, without a scheme or a port (the port is {name[:4]}_port)")
        return v

    @field_validator("username")
    @classmethod
    def _username(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError('username is empty: the mailbox\'s login, as username = "bot@example.org"')
        return v

    @field_validator("password")
    @classmethod
    def _password(cls, v: SecretStr) -> SecretStr:
        # not held to the 16 characters of the hub's own secrets: the provider chose it, and
        # the hub authenticates nobody with it (it is a client's credential, not a webhook's)
        if not v.get_secret_value():
            raise ValueError(
                'password is empty: set the environment variable EMAIL_PASSWORD (password = "${EMAIL_PASSWORD}")'
            )
        return v

    @field_validator("folder")
    @classmethod
    def _folder(cls, v: str) -> str:
        v = v.strip()
        if not v or any(ch in v for ch in '"\\\r\n'):
            raise ValueError(f"folder must be a folder name such as INBOX, not {v!r}")
        if not v.isascii():  # IMAP writes other names in modified UTF-7, which is not done here
            raise ValueError(f"folder must be an ASCII name (such as INBOX or Bot), not {v!r}")
        return v

    @field_validator("bots")
    @classmethod
    def _bots(cls, v: list[str]) -> list[str]:
        out = [address_of(b) for b in v]
        for entry, addr in zip(v, out, strict=True):
            if not addr:
                raise ValueError(f"{entry!r} is not an address (bot@example.org)")
        return out

    @field_validator("allowed_senders")
    @classmethod
    def _senders(cls, v: list[str]) -> list[str]:
        out = []
        for entry in v:
            e = entry.strip().lower()
            if e.startswith("@") and "." in e[1:] and "@" not in e[1:]:
                out.append(e)
            elif address_of(e) == e:
                out.append(e)
            else:
                raise ValueError(f"{entry!r} is neither an address (alice@example.org) nor a domain (@example.org)")
        return out

    @field_validator("rate")
    @classmethod
    def _rate(cls, v: tuple[int, float]) -> tuple[int, float]:
        if v[0] < 1 or v[1] <= 0:
            raise ValueError("must be [mails, seconds] with mails >= 1 and seconds > 0")
        return v

    @model_validator(mode="after")
    def _whole(self) -> EmailSettings:
        if not self.address:
            if not address_of(self.username):
                raise ValueError('address is empty and username is not an address: set address = "bot@example.org"')
            self.address = address_of(self.username)
        elif address_of(self.address) != self.address.strip().lower():
            raise ValueError(f"address must be the bot's bare address (bot@example.org), not {self.address!r}")
        else:
            self.address = self.address.strip().lower()
        if self.tls == "none":
            for key, host in (("imap_host", self.imap_host), ("smtp_host", self.smtp_host)):
                if not is_loopback(host):
                    raise ValueError(
                        f'tls = "none" sends the password in the clear: only to a loopback host, and {key} '
                        f'is {host!r} (use "implicit" or "starttls")'
                    )
        # allowed_users (every platform's) and allowed_senders are one list here
        merged = [*self.allowed_senders, *(str(u).strip().lower() for u in self.allowed_users)]
        self.allowed_users = list(dict.fromkeys(merged))
        return self

    @property
    def domain(self) -> str:
        return self.address.rpartition("@")[2]


class EmailThread(BaseModel):
    """The args of ``email:thread``: one thread, by the Message-ID of its first mail (without
    its angle brackets)."""

    thread: str

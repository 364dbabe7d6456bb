"""``[extensions.whatsapp]``: the settings, each with a default that works except the
number's id and the three secrets."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator

from hub.platform import PlatformSettings, check_secret_length, host_name

__all__ = ["WhatsAppSettings", "WhatsAppChat", "MEDIA_HOSTS", "GRAPH_HOST"]

GRAPH_HOST = "graph.facebook.com"
MEDIA_HOSTS = ("lookaside.fbsbx.com",)
"""Where Meta serves a media file's download URL: a URL elsewhere is never fetched (it
would carry the access token)."""


class WhatsAppSettings(PlatformSettings):
    """What the operator may set under ``[extensions.whatsapp]``.

    ``allowed_users`` (WhatsApp ids: the phone number in international form, digits only),
    ``dm_policy``, ``loop_guard_*`` and ``send_*`` are every platform's
    ([`hub.platform.PlatformSettings`][hub.platform.PlatformSettings]). Every WhatsApp chat is a private one, so
    ``dm_policy`` applies to each.
    """

    phone_number_id: str = ""
    """The Phone Number ID the bot sends from (WhatsApp Manager > API Setup), digits."""
    token: SecretStr = Field(SecretStr(""), validate_default=True)
    """A system user's access token with ``whatsapp_business_messaging``:
    ``token = "${WHATSAPP_TOKEN}"``."""
    app_secret: SecretStr = Field(SecretStr(""), validate_default=True)
    """The app's secret (App settings > Basic): every webhook's ``X-Hub-Signature-256`` is
    checked with it before its body is parsed."""
    verify_token: SecretStr = Field(SecretStr(""), validate_default=True)
    """A string you choose and type into Meta's webhook settings: Meta's GET check of the
    URL must carry it."""
    webhook_path: str = "/whatsapp"
    """The path of the callback URL on the hub's ``[http]`` endpoint."""
    base_url: str = ""
    """Where Graph API requests go; empty: ``https://graph.facebook.com`` (tests point it at a fake)."""
    api_version: str = ""
    """The Graph API version in each request's path (``"23.0"``); empty: pywa's (the newest it knows)."""
    template: str = ""
    """An approved message template (one body parameter, ``{{1}}``) that carries a message
    the bot starts outside the 24-hour customer-service window (a schedule, a webhook);
    empty: such a message is skipped, with a log line."""
    template_language: str = "en_US"
    """The template's language code."""
    typing: bool = True
    """Show "typing..." (and mark the message read) while the model writes the answer."""
    read_receipts: bool = True
    """Mark each message read (blue ticks) as soon as it is recorded."""
    bots: list[str] = Field(default_factory=list)
    """WhatsApp ids of other bots (another business number): their messages count against the
    loop guard."""
    chat_rate: tuple[int, float] = (10, 6.0)
    """Messages per seconds to one user: Meta's pair rate limit (131056) is about one every 6
    seconds, with short bursts allowed."""
    rate: tuple[int, float] = (80, 1.0)
    """Messages per seconds from the number in all: Cloud API throughput (130429) is 80 a second by default."""
    pair_wait: float = Field(6.0, gt=0, le=600)
    """Seconds to wait after Meta's pair rate limit (131056) before sending to that user again,
    doubled at each one in a row (Meta sends no Retry-After)."""
    throughput_wait: float = Field(1.0, gt=0, le=600)
    """Seconds every send waits after a throughput limit (130429, 80007), doubled likewise."""
    ready_timeout: float = Field(30.0, gt=0)
    """Seconds ``hub run`` waits for the Graph API to answer at start."""
    media_hosts: list[str] = Field(default_factory=list)
    """Hosts added to `MEDIA_HOSTS` that media may be downloaded from (public addresses only)."""

    @field_validator("phone_number_id")
    @classmethod
    def _phone_number_id(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError(
                "the phone number id is empty: set WHATSAPP_PHONE_NUMBER_ID to the Phone Number ID of "
                'WhatsApp Manager > API Setup (phone_number_id = "${WHATSAPP_PHONE_NUMBER_ID}")'
            )
        if not v.isdigit():
            raise ValueError("the phone number id is the Phone Number ID (digits), not the phone number itself")
        return v

    @field_validator("token", "app_secret", "verify_token")
    @classmethod
    def _secret(cls, v: SecretStr, info: object) -> SecretStr:
        name = getattr(info, "field_name", "secret")
        value = v.get_secret_value().strip()
        env = {"token": "WHATSAPP_TOKEN", "app_secret": "WHATSAPP_APP_SECRET", "verify_token": "WHATSAPP_VERIFY_TOKEN"}
        if not value:
            raise ValueError(f'{name} is empty: set the environment variable {env[name]} ({name} = "${{{env[name]}}}")')
        check_secret_length(value, what=f"{name} ")
        return SecretStr(value)

    @field_validator("template_language")
    @classmethod
    def _template_language(cls, v: str) -> str:
        from pywa_async.types.templates import TemplateLanguage

        if v not in {lang.value for lang in TemplateLanguage}:
            raise ValueError(f"{v!r} is not a template language code Meta knows (en_US, es_MX, pt_BR, ...)")
        return v

    @field_validator("webhook_path")
    @classmethod
    def _webhook_path(cls, v: str) -> str:
        if not v.startswith("/") or v == "/":
            raise ValueError(f"webhook_path must be a path such as /whatsapp, not {v!r}")
        return v

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        if v and (urlsplit(v).scheme not in ("http", "https") or not urlsplit(v).hostname):
            raise ValueError(f"base_url must be an http(s) URL such as http://127.0.0.1:8090, not {v!r}")
        return v

    @field_validator("chat_rate", "rate")
    @classmethod
    def _rate_positive(cls, v: tuple[int, float]) -> tuple[int, float]:
        if v[0] < 1 or v[1] <= 0:
            raise ValueError("must be [messages, seconds] with messages >= 1 and seconds > 0")
        return v

    @field_validator("media_hosts")
    @classmethod
    def _media_hosts(cls, v: list[str]) -> list[str]:
        return [host_name(h) for h in v]

    @field_validator("bots")
    @classmethod
    def _bots(cls, v: list[str]) -> list[str]:
        return [wa_id(b) for b in v]


def wa_id(number: str) -> str:
    """A WhatsApp id as Meta writes it: the number's digits, no ``+``, spaces or dashes.

    Raises:
        ValueError: not a phone number.
    """
    digits = "".join(ch for ch in str(number) if ch not in "+ -()")
    if not digits.isdigit():
        raise ValueError(f"{number!r} is not a WhatsApp number (digits, as 15550001111)")
    return digits


class WhatsAppChat(BaseModel):
    """The args of ``whatsapp:chat``: one user, by WhatsApp id (``wa_id``)."""

    wa_id: str

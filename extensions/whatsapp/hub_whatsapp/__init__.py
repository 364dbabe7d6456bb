"""WhatsApp (Meta's WhatsApp Business Cloud API, through ``pywa_async``): context
``whatsapp:chat`` (one user, by WhatsApp id), input ``whatsapp:webhooks``, output
``whatsapp:message``.

Meta POSTs each message to the callback URL, ``webhook_path`` on the hub's ``[http]``
endpoint, signed with the app secret; the hub checks the signature before it parses the
body, records the message in its inbox (``platform_id = "whatsapp:<wamid>"``) and only then
answers 200, so a crash never loses one and a redelivery is never answered twice. Replies
are text (split at 4,096 characters), pictures, documents and audio (uploaded to the media
endpoint), and reactions; the message is marked read and "typing..." shown while the model
writes. A reply falls inside the user's 24-hour customer-service window; a message the bot
starts outside it (a schedule) goes through ``template``, or is skipped with a log line.
``/help``, ``/new`` and ``/stop`` are typed as text.

Modules: ``_settings`` (the config table), ``_events`` (a webhook's messages and statuses:
pure), ``_client`` (the Graph API under a Governor, media in), ``_window`` (the 24-hour
window, in the hub's memory store), ``_intake`` (a webhook into the hub), ``_webhook`` (the
route: Meta's GET check and the signed POSTs).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from hub import Context, Extension, Input, RunContext, Service, output
from hub.platform import Resolve, SendFailed, quiet_loggers, reply_target, speak, split_message

from ._client import MAX_LENGTH, Identity, OutsideWindow, WhatsAppClient, WhatsAppStartError
from ._events import CHAT, OUTPUT, Inbound, Status, Unreadable, read_payload
from ._intake import PARK_AFTER, Intake, Sent
from ._settings import MEDIA_HOSTS, WhatsAppChat, WhatsAppSettings
from ._webhook import SIGNATURE_HEADER, MetaSignature, Webhook
from ._window import MARGIN, WINDOW, Windows

if TYPE_CHECKING:
    from hub import Hub

__all__ = [
    "WhatsAppSettings",
    "WhatsAppChat",
    "WhatsAppClient",
    "WhatsAppStartError",
    "OutsideWindow",
    "Identity",
    "MetaSignature",
    "Inbound",
    "Status",
    "Unreadable",
    "read_payload",
    "Windows",
    "MessageAttributes",
    "extension",
    "MAX_LENGTH",
    "MEDIA_HOSTS",
    "SIGNATURE_HEADER",
    "PARK_AFTER",
    "WINDOW",
    "MARGIN",
]

log = logging.getLogger("hub_whatsapp")

TEMPLATE_PARAMETER_LENGTH = 1024
"""Characters in a template's body parameter: a longer message goes in several templates."""

_INSTRUCTIONS = (
    "This conversation is on WhatsApp, with one person. Keep answers short and plain: WhatsApp "
    "shows *bold*, _italic_ and ```code```, not Markdown headings or tables; long answers are split "
    "into several messages for you."
)


class MessageAttributes(BaseModel):
    """``whatsapp:message``'s attributes: files to attach, and a reaction."""

    attach: str = Field(
        "",
        description="files to send after the text, comma-separated: media handles from action results (media:1)",
    )
    react: str = Field("", description="an emoji to react with to the user's newest message (the text may be empty)")


class _WhatsApp:
    """The service, the input and the output of one WhatsApp number."""

    def __init__(self, settings: WhatsAppSettings, resolve: Resolve | None) -> None:
        self.settings = settings
        self.client = WhatsAppClient(settings, resolve=resolve)
        self.webhook = Webhook(settings)
        self.sent = Sent()
        self.hub: Hub | None = None
        self.windows: Windows | None = None

    # --- the service ----------------------------------------------------------------------

    async def start(self, hub: Hub) -> None:
        """The number's details from the Graph API, within ``ready_timeout``: a refused token
        or number stops ``hub run`` with one line."""
        self.hub = hub
        self.windows = Windows(hub.memory)
        self.client.report_to(hub)
        try:
            async with asyncio.timeout(self.settings.ready_timeout):
                me = await self.client.sign_in()
        except TimeoutError as e:
            await self.client.close()
            raise WhatsAppStartError(
                f"the Graph API did not answer within {self.settings.ready_timeout:g}s (ready_timeout)"
            ) from e
        except BaseException:
            await self.client.close()
            raise
        log.info(
            "whatsapp: sending from %s (%s), webhooks at %s", me.display_number, me.name, self.settings.webhook_path
        )

    async def stop(self) -> None:
        await self.client.close()

    # --- the input ------------------------------------------------------------------------

    async def subscribe(self, send: Any, hub: Hub) -> Any:
        """Take webhooks on every worker: each request is proven by its signature."""
        if self.windows is None:
            raise WhatsAppStartError("the whatsapp service is not started")
        intake = Intake(self.client, self.settings, hub, send, self.windows, self.sent)
        self.webhook.intake = intake

        async def stop() -> None:
            self.webhook.intake = None
            await intake.stop()

        return stop

    # --- the output -----------------------------------------------------------------------

    async def send(self, content: str, ctx: RunContext) -> dict[str, Any]:
        """The reply, split at 4,096 characters, in order; files after it; a reaction. Inside
        the user's 24-hour window as free-form messages; outside it through ``template``, or
        not at all (logged).

        Raises:
            SendFailed: a part could not be sent (the error says how many went out before),
                or the window is closed and no template is configured.
        """
        wa_id = str(ctx.context.args.wa_id)
        attrs = ctx.attributes
        attach = attrs.attach if isinstance(attrs, MessageAttributes) else ""
        react = attrs.react.strip() if isinstance(attrs, MessageAttributes) else ""
        names = [s.strip() for s in attach.split(",") if s.strip()]
        files = [await ctx.media.resolve(name) for name in names]  # a MediaError names the file and why
        data: dict[str, Any] = {"wa_id": wa_id}
        windows = self.windows or Windows(ctx.hub.memory)
        if await windows.is_open(wa_id):
            if react:  # a reaction is a free-form message too: only inside the window
                asked = reply_target(ctx, "wamid", where={"wa_id": wa_id})
                if asked is not None:
                    data["reaction"] = await self.client.react(wa_id, str(asked["wamid"]), react)
            data["message_ids"] = await self._free_form(wa_id, content, ctx)
            voices = await self._spoken(wa_id, content, ctx)
            if voices:
                data["voice_message_ids"] = voices
        elif content.strip() or files:
            data["message_ids"] = await self._templated(wa_id, content, ctx)
            data["template"] = self.settings.template
            if files:
                log.info("whatsapp: %d file(s) to %s not sent: outside the 24-hour window", len(files), wa_id)
            return data
        if files:
            data["files"] = [await self.client.send_file(wa_id, f) for f in files]
        return data

    async def _free_form(self, wa_id: str, content: str, ctx: RunContext) -> list[str]:
        parts = split_message(content, MAX_LENGTH)
        ids: list[str] = []
        for i, part in enumerate(parts):
            try:
                ids.append(await self.client.send_text(wa_id, part))
            except SendFailed as e:
                if isinstance(e.__cause__, OutsideWindow) and self.windows is not None:
                    await self.windows.closed(wa_id)  # Meta says so: later messages know it at once
                if ids:
                    raise SendFailed(
                        "whatsapp", wa_id, f"{e.reason} (part {i + 1} of {len(parts)}; parts sent: {', '.join(ids)})"
                    ) from e
                raise
            self.sent.add(ids[-1], wa_id, part)
            await ctx.part_sent(i, ids[-1])  # durable: a restart will not send it again
        return ids

    async def _spoken(self, wa_id: str, content: str, ctx: RunContext) -> list[str]:
        """The reply spoken too, as voice notes after its text, when ``[voice]`` says so
        ([`hub.platform.speak()`][hub.platform.speak]); inside the window only. A failure is logged: the
        text went out."""
        ids: list[str] = []
        for clip in await speak(ctx, content):
            try:
                ids.append(await self.client.send_voice(wa_id, clip))
            except SendFailed as e:
                log.warning("whatsapp: a spoken reply to %s was not sent: %s", wa_id, e)
                break
        return ids

    async def _templated(self, wa_id: str, content: str, ctx: RunContext) -> list[str]:
        template = self.settings.template
        if not template:
            log.warning(
                "whatsapp: a message to %s was skipped: their 24-hour window is closed and no template is "
                "configured ([extensions.whatsapp] template)",
                wa_id,
            )
            raise SendFailed(
                "whatsapp", wa_id, "skipped: outside the 24-hour customer-service window, and no template configured"
            )
        ids: list[str] = []
        for i, part in enumerate(split_message(content, TEMPLATE_PARAMETER_LENGTH) or [" "]):
            ids.append(await self.client.send_template(wa_id, part))
            await ctx.part_sent(i, ids[-1])
        log.info("whatsapp: %s is outside the 24-hour window: sent through the template %r", wa_id, template)
        return ids


def extension(settings: WhatsAppSettings, *, resolve: Resolve | None = None) -> Extension:
    """The WhatsApp extension for ``[extensions.whatsapp]``. ``resolve`` finds the addresses of
    Meta's media hosts (default: the system's resolver, public addresses only; tests route
    their fake's names to it). Nothing connects until the hub starts."""
    quiet_loggers("pywa", "pywa_async", "httpx", "httpcore")
    wa = _WhatsApp(settings, resolve)
    chat: Context[WhatsAppChat, dict[str, Any]] = Context(
        type=CHAT,
        schema=WhatsAppChat,
        key=lambda a: a.wa_id,
        description="A WhatsApp chat with one user, keyed by their WhatsApp id (the number's digits).",
        instructions=_INSTRUCTIONS,
        reply_output=OUTPUT,
    )
    message = output(
        type=OUTPUT,
        attributes=MessageAttributes,
        enabled=lambda ctx: ctx.context.type == CHAT,
        description="Send a message to this WhatsApp user, with files if attach names them, or a reaction.",
        instructions=(
            'Any length: it is split at 4096 characters. attach="media:1" sends a file an action returned; '
            'react="👍" reacts to their last message.'
        ),
    )(wa.send)
    return Extension(
        name="whatsapp",
        contexts=[chat],
        outputs=[message],
        inputs=[
            Input(
                type="whatsapp:webhooks",
                subscribe=wa.subscribe,
                description="Messages from WhatsApp users (Meta's webhooks).",
                fetch=wa.client.fetch,
            )
        ],
        services=[Service(name="whatsapp", start=wa.start, stop=wa.stop)],
        routes=[wa.webhook.route()],
        description="WhatsApp Business Cloud API (webhooks).",
    )

"""Telegram: context ``telegram:chat`` (one per chat id), input ``telegram:message``
(long polling, or webhook mode with ``webhook_url``), outputs ``telegram:send``,
``telegram:photo`` and ``telegram:document``.

Photos, documents, stickers, voice notes, audio and video arrive as references
(``file_id``); the hub fetches one through ``getFile`` only when a run needs its bytes
(:meth:`TelegramClient.fetch`). A photo without a caption is answered like a message.

Answers private chats, and in groups when mentioned or replied to (``groups``). Every
message is recorded in the hub's inbox before Telegram is told it was received, so a crash
loses nothing and a redelivery is not answered twice. Replies are split at 4096 (code
blocks whole), paced per chat and globally, retried after 429s, and sent as plain text when
Telegram refuses their markup.

Modules: ``_settings`` (the config table), ``_filter`` (which messages to answer: pure),
``_client`` (the PTB ``Bot`` and everything outbound), ``_intake`` (an update into the hub:
the filter, access, the loop guard, the inbox; however it arrived), ``_commands`` (the hub's
chat commands: setMyCommands at start, ``/cmd@bot`` through PTB's ``CommandHandler``),
``_polling`` (the long-polling loop), ``_webhook`` (webhook mode: the route on the hub's
``[http]`` endpoint and setWebhook).

Across workers sharing one store, one polls (the lease ``telegram:poll:<bot id>``; the
others take over when it stops or its lease expires); in webhook mode every worker answers
Telegram's POSTs and one calls setWebhook (the lease ``telegram:webhook:<bot id>``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from hub import Context, Extension, Input, LiveText, Output, RunContext, Service, output
from hub.platform import LiveMessage, SendFailed, live_drafts, quiet_loggers, reply_target, utf16_len

from ._approvals import TelegramApprover
from ._client import MAX_CAPTION_LENGTH, MAX_MESSAGE_LENGTH, TelegramClient, map_error
from ._filter import Ignored, Inbound, classify
from ._intake import ALLOWED_UPDATES, Intake
from ._polling import OFFSET_KEY, Poller
from ._settings import TelegramSettings
from ._webhook import SECRET_HEADER, Webhook

if TYPE_CHECKING:
    from hub import Hub

__all__ = [
    "TelegramSettings",
    "TelegramChat",
    "TelegramClient",
    "Inbound",
    "Ignored",
    "classify",
    "map_error",
    "extension",
    "OFFSET_KEY",
    "ALLOWED_UPDATES",
    "MAX_MESSAGE_LENGTH",
    "MAX_CAPTION_LENGTH",
    "FileAttributes",
    "SECRET_HEADER",
]

log = logging.getLogger("hub_telegram")

_FORMATTING = {
    "": "Write plain text: Telegram shows it as it is (no Markdown).",
    "HTML": 'Format with Telegram\'s HTML: <b>, <i>, <u>, <s>, <code>, <pre>, <a href="...">; '
    "write &lt; &gt; &amp; for <, > and & in text.",
    "MarkdownV2": "Format with Telegram's MarkdownV2: *bold*, _italic_, `code`, ```pre```; escape "
    "each of _*[]()~`>#+-=|{}.! in text with a backslash.",
    "Markdown": "Format with Telegram's legacy Markdown: *bold*, _italic_, `code`, ```pre```.",
}


class FileAttributes(BaseModel):
    """The attribute of ``telegram:photo`` and ``telegram:document``: which file to send."""

    src: str = Field(description="a file from an action's result (media:1), or an https URL on [media] url_hosts")


class TelegramChat(BaseModel):
    """Args of ``telegram:chat``: the chat's id (negative for groups)."""

    chat_id: int


def extension(settings: TelegramSettings) -> Extension:
    """The Telegram extension for ``[extensions.telegram]``; connects nothing until the hub starts."""
    quiet_loggers("telegram")  # python-telegram-bot logs each request at INFO
    client = TelegramClient(settings)
    webhook = Webhook(client, settings) if settings.webhook_url else None
    return Extension(
        name="telegram",
        contexts=[_chat(settings)],
        outputs=_outputs(client, settings),
        inputs=[
            Input(
                type="telegram:message",
                subscribe=_subscriber(client, settings, webhook),
                description="Messages to the bot on Telegram.",
                fetch=client.fetch,
            )
        ],
        services=[Service(name="telegram", start=client.start, stop=client.stop)],
        routes=[webhook.route()] if webhook is not None else [],
        approver=TelegramApprover(client),
        description="Telegram bot (webhook mode)." if webhook is not None else "Telegram bot (long polling).",
    )


def _chat(settings: TelegramSettings) -> Context[TelegramChat, dict[str, Any]]:
    return Context(
        type="telegram:chat",
        schema=TelegramChat,
        key=lambda a: str(a.chat_id),
        description="A Telegram chat: a private conversation with one user, or a group.",
        instructions=(
            "You are talking on Telegram. In groups, several people talk; each message names its "
            "sender's user id. " + _FORMATTING[settings.parse_mode]
        ),
        reply_output="telegram:send",
    )


def _outputs(client: TelegramClient, settings: TelegramSettings) -> list[Output]:
    """``telegram:send`` (whole, or ``live``), ``telegram:photo`` and ``telegram:document``."""

    def reply_to(ctx: RunContext, chat_id: int) -> int | None:
        trigger = reply_target(ctx, "message_id", where={"chat_id": chat_id})
        if trigger is not None and settings.reply_in_groups and trigger.get("chat_type") in ("group", "supergroup"):
            return int(trigger["message_id"])
        return None

    # RunContext is imported at run time: the decorator reads the handlers' type hints
    async def send(content: str, ctx: RunContext) -> dict[str, Any]:
        chat_id = ctx.context.args.chat_id
        ids = await client.send_text(chat_id, content, reply_to=reply_to(ctx, chat_id), on_part=ctx.part_sent)
        return {"chat_id": chat_id, "message_ids": ids}

    async def send_live(content: LiveText, ctx: RunContext) -> dict[str, Any]:
        """``live = true``: one message edited while the model writes, continued past 4096."""
        chat_id = ctx.context.args.chat_id
        return await _deliver_live(client, settings, chat_id, reply_to(ctx, chat_id), content, ctx)

    async def send_file(content: str, ctx: RunContext, *, as_photo: bool) -> dict[str, Any]:
        chat_id = ctx.context.args.chat_id
        attrs = ctx.attributes
        assert isinstance(attrs, FileAttributes)
        file = await ctx.media.resolve(attrs.src)  # a MediaError says which file and why
        ids = await client.send_file(chat_id, file, content.strip(), as_photo=as_photo, on_part=ctx.part_sent)
        return {"chat_id": chat_id, "message_ids": ids, "file": file.name, "type": file.mime, "size": file.size}

    @output(
        type="telegram:photo",
        context="telegram:chat",
        attributes=FileAttributes,
        description="Send a picture to this Telegram chat; the content is its caption (may be empty).",
        instructions=f"src names the picture: the media handle an action returned (media:1). A caption over "
        f"{MAX_CAPTION_LENGTH} characters follows the picture as a message.",
        examples=['<output type="telegram:photo" src="media:1">The chart you asked for</output>'],
    )
    async def photo(content: str, ctx: RunContext) -> dict[str, Any]:
        return await send_file(content, ctx, as_photo=True)

    @output(
        type="telegram:document",
        context="telegram:chat",
        attributes=FileAttributes,
        description="Send a file to this Telegram chat as a document; the content is its caption (may be empty).",
        instructions="src names the file: the media handle an action returned (media:1).",
        examples=['<output type="telegram:document" src="media:2">The report</output>'],
    )
    async def document(content: str, ctx: RunContext) -> dict[str, Any]:
        return await send_file(content, ctx, as_photo=False)

    message = output(
        type="telegram:send",
        context="telegram:chat",
        description="Send a message to this Telegram chat.",
        instructions="Long messages are split into several; do not shorten what you mean to say.",
        live=settings.live,
    )(send_live if settings.live else send)
    return [message, photo, document]


async def _deliver_live(
    client: TelegramClient,
    settings: TelegramSettings,
    chat_id: int,
    reply_to: int | None,
    content: LiveText,
    ctx: RunContext,
) -> dict[str, Any]:
    """One message edited as ``content`` grows, continued in new ones past 4096 characters;
    the first one quotes ``reply_to``."""
    quote = [reply_to]  # the first message only

    async def send_part(text: str) -> int:
        first, quote[0] = quote[0], None
        return await client.send_one(chat_id, text, reply_to=first)

    # A message whose markup Telegram refused (half-written: an unclosed tag) is edited as
    # plain text from then on, one request per edit instead of two, and given its markup
    # once more when the reply is complete (below).
    refused: dict[int, str] = {}

    async def edit(message_id: int, text: str) -> None:
        plain = message_id in refused
        if not await client.edit_text(chat_id, message_id, text, markup=not plain) and settings.parse_mode:
            refused[message_id] = text

    async def delete(message_id: int) -> None:
        await client.delete_message(chat_id, message_id)

    result = await LiveMessage(
        send=send_part,
        edit=edit,
        delete=delete,
        limit=MAX_MESSAGE_LENGTH,
        length=utf16_len,
        interval=settings.live_interval,
        on_part=ctx.part_sent,
        adopt=live_drafts(ctx, "telegram:send"),
    ).deliver(content)
    for message_id, text in refused.items():
        if message_id in result.message_ids:  # complete now: its markup is balanced, or plain it stays
            try:
                await client.edit_text(chat_id, message_id, text)
            except SendFailed as e:  # it shows the whole text already, as plain text
                log.warning("telegram: chat %s: message %s keeps its plain text: %s", chat_id, message_id, e)
    return {"chat_id": chat_id, "message_ids": result.message_ids, "edits": result.edits}


def _subscriber(
    client: TelegramClient, settings: TelegramSettings, webhook: Webhook | None
) -> Callable[[Callable[..., Awaitable[Any]], Hub], Awaitable[Callable[[], Awaitable[None]]]]:
    """The input's subscribe: an intake for the hub, fed by the webhook on every worker (one
    of which sets it, under a lease), or by the poller on the one worker holding its lease."""

    async def subscribe(send_input: Callable[..., Awaitable[Any]], hub: Hub) -> Callable[[], Awaitable[None]]:
        intake = Intake(client, settings, hub, send_input)
        # the command menus, set at start by every worker (the same menus: harmless)
        menus = hub.create_task(intake.commands.keep_registering(), name="telegram:commands")
        if webhook is not None:  # every worker answers POSTs; one sets the webhook
            webhook.receiver = intake
            keeper = hub.lease(f"telegram:webhook:{settings.bot_id()}", ttl=settings.lease_ttl)
            task = hub.create_task(keeper.hold(webhook.register), name="telegram:webhook")
        else:  # one worker polls
            poller = Poller(client, settings, intake)
            keeper = hub.lease(f"telegram:poll:{settings.bot_id()}", ttl=settings.lease_ttl)
            task = hub.create_task(keeper.hold(poller.run), name="telegram:poll")

        async def stop() -> None:
            if webhook is not None:
                webhook.receiver = None
            task.cancel()
            menus.cancel()
            await asyncio.gather(task, menus, return_exceptions=True)
            await intake.stop()

        return stop

    return subscribe

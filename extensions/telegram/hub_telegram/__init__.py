"""Telegram: context ``telegram:chat`` (one per chat id), input ``telegram:message``
(long polling, or webhook mode with ``webhook_url``), output ``telegram:send``.

Answers private chats, and in groups when mentioned or replied to (``groups``). Every
message is recorded in the hub's inbox before Telegram is told it was received, so a crash
loses nothing and a redelivery is not answered twice. Replies are split at 4096 (code
blocks whole), paced per chat and globally, retried after 429s, and sent as plain text when
Telegram refuses their markup.

Modules: ``_settings`` (the config table), ``_filter`` (which messages to answer: pure),
``_client`` (the PTB ``Bot`` and everything outbound), ``_poller`` (the polling loop),
``_webhook`` (webhook mode: the route on the hub's ``[http]`` endpoint and setWebhook).

Across workers sharing one store, one polls (the lease ``telegram:poll:<bot id>``; the
others take over when it stops or its lease expires); in webhook mode every worker answers
Telegram's POSTs and one calls setWebhook (the lease ``telegram:webhook:<bot id>``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from hub import Context, Extension, Input, RunContext, Service, output
from hub.platform import quiet_loggers, reply_target

from ._client import MAX_MESSAGE_LENGTH, TelegramClient, map_error
from ._filter import Ignored, Inbound, classify
from ._poller import ALLOWED_UPDATES, OFFSET_KEY, Poller
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
    "SECRET_HEADER",
]

log = logging.getLogger("hub_telegram")

_FORMATTING = {
    "": "Write plain text: Telegram shows it as it is (no Markdown).",
    "HTML": "Format with Telegram's HTML: <b>, <i>, <u>, <s>, <code>, <pre>, <a href=\"...\">; "
    "write &lt; &gt; &amp; for <, > and & in text.",
    "MarkdownV2": "Format with Telegram's MarkdownV2: *bold*, _italic_, `code`, ```pre```; escape "
    "each of _*[]()~`>#+-=|{}.! in text with a backslash.",
    "Markdown": "Format with Telegram's legacy Markdown: *bold*, _italic_, `code`, ```pre```.",
}


class TelegramChat(BaseModel):
    """Args of ``telegram:chat``: the chat's id (negative for groups)."""

    chat_id: int


def extension(settings: TelegramSettings) -> Extension:
    """The Telegram extension for ``[extensions.telegram]``; connects nothing until the hub starts."""
    quiet_loggers("telegram")  # python-telegram-bot logs each request at INFO
    client = TelegramClient(settings)

    chat = Context(
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

    # RunContext is imported at run time: the decorator reads the handler's type hints
    @output(
        type="telegram:send",
        context="telegram:chat",
        description="Send a message to this Telegram chat.",
        instructions="Long messages are split into several; do not shorten what you mean to say.",
    )
    async def send(content: str, ctx: RunContext) -> dict[str, Any]:
        chat_id = ctx.context.args.chat_id
        trigger = reply_target(ctx, "message_id", where={"chat_id": chat_id})
        reply_to = None
        if trigger is not None and settings.reply_in_groups and trigger.get("chat_type") in ("group", "supergroup"):
            reply_to = trigger["message_id"]
        ids = await client.send_text(chat_id, content, reply_to=reply_to, on_part=ctx.part_sent)
        return {"chat_id": chat_id, "message_ids": ids}

    webhook = Webhook(client, settings) if settings.webhook_url else None

    async def subscribe(send_input: Callable[..., Awaitable[Any]], hub: Hub) -> Callable[[], Awaitable[None]]:
        poller = Poller(client, settings, hub, send_input)
        if webhook is not None:  # every worker answers POSTs; one sets the webhook
            webhook.receiver = poller
            keeper = hub.lease(f"telegram:webhook:{settings.bot_id()}", ttl=settings.lease_ttl)
            task = hub.create_task(keeper.hold(webhook.register), name="telegram:webhook")
        else:  # one worker polls
            keeper = hub.lease(f"telegram:poll:{settings.bot_id()}", ttl=settings.lease_ttl)
            task = hub.create_task(keeper.hold(poller.run), name="telegram:poll")

        async def stop() -> None:
            if webhook is not None:
                webhook.receiver = None
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await poller.stop()

        return stop

    return Extension(
        name="telegram",
        contexts=[chat],
        outputs=[send],
        inputs=[Input(type="telegram:message", subscribe=subscribe, description="Messages to the bot on Telegram.")],
        services=[Service(name="telegram", start=client.start, stop=client.stop)],
        routes=[webhook.route()] if webhook is not None else [],
        description="Telegram bot (webhook mode)." if webhook is not None else "Telegram bot (long polling).",
    )

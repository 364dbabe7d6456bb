"""Telegram: context ``telegram:chat`` (one per chat id), input ``telegram:message``
(long polling, or webhook mode with ``webhook_url``), outputs ``telegram:send``,
``telegram:photo`` and ``telegram:document``.

Photos, documents, stickers, voice notes, audio, video and video notes arrive as references
(``file_id``); the hub fetches one through ``getFile`` only when a run needs its bytes
(`TelegramClient.fetch()`). A photo without a caption is answered like a message. With
``[voice]``, voice notes, audio and video notes are heard (transcribed), and a reply is also
spoken as ``sendVoice`` OGG/Opus when ``reply_with_voice`` says so (not a live one); a user
whose privacy settings forbid voice messages gets the text alone.

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

Several bots (``[extensions.telegram.accounts.NAME]``): each account has its own client,
listener, lease, governor and command menus. A second account's chats are
``telegram:chat:NAME/<chat id>``, and replies to them go out through that account's bot.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from hub import Context, Extension, Input, LiveText, MediaPart, Output, RunContext, Service, output
from hub.platform import (
    DEFAULT_ACCOUNT,
    LiveMessage,
    SendFailed,
    account_key,
    live_drafts,
    quiet_loggers,
    reply_target,
    speak,
    split_account_key,
    utf16_len,
)

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
    """Args of ``telegram:chat``: the chat's id (negative for groups) and the account (bot)
    it is with ("": the platform table's)."""

    chat_id: int
    account: str = DEFAULT_ACCOUNT


class _Accounts:
    """Each account's client, by name: outputs and file fetches go through the account of
    the conversation they belong to."""

    def __init__(self, settings: TelegramSettings) -> None:
        self.settings = dict(settings.every_account())
        self.clients = {name: TelegramClient(s, account=name) for name, s in self.settings.items()}

    def client(self, account: str) -> TelegramClient:
        client = self.clients.get(account)
        if client is None:
            known = ", ".join(repr(a) for a in self.clients if a) or "none"
            raise SendFailed("telegram", account, f"no Telegram account {account!r} (accounts: {known})")
        return client

    async def fetch(self, part: MediaPart, max_bytes: int) -> bytes:
        """A file of an inbound message, through the bot that received it (a file id is
        valid for that bot only): another account's refs are ``ACCOUNT/<file id>``."""
        account, ref = split_account_key(part.ref)
        return await self.client(account).fetch(dataclasses.replace(part, ref=ref), max_bytes)


def extension(settings: TelegramSettings) -> Extension:
    """The Telegram extension for ``[extensions.telegram]`` and its accounts; connects nothing
    until the hub starts."""
    quiet_loggers("telegram")  # python-telegram-bot logs each request at INFO
    accounts = _Accounts(settings)
    webhooks = {
        name: Webhook(client, client.settings)
        for name, client in accounts.clients.items()
        if client.settings.webhook_url
    }
    return Extension(
        name="telegram",
        contexts=[_chat(settings)],
        outputs=_outputs(accounts, settings),
        inputs=[
            Input(
                type="telegram:message",
                subscribe=_subscriber(accounts, webhooks),
                description="Messages to the bot on Telegram.",
                fetch=accounts.fetch,
            )
        ],
        services=[
            Service(name=client.label, start=client.start, stop=client.stop) for client in accounts.clients.values()
        ],
        routes=[w.route() for w in webhooks.values()],
        approver=TelegramApprover(accounts.client),
        description="Telegram bot (webhook mode)." if webhooks else "Telegram bot (long polling).",
    )


def _parse_key(key: str) -> dict[str, Any]:
    account, chat_id = split_account_key(key)
    return {"account": account, "chat_id": chat_id}


def _chat(settings: TelegramSettings) -> Context[TelegramChat, dict[str, Any]]:
    return Context(
        type="telegram:chat",
        schema=TelegramChat,
        key=lambda a: account_key(a.account, str(a.chat_id)),
        parse_key=_parse_key,
        description="A Telegram chat: a private conversation with one user, or a group.",
        instructions=(
            "You are talking on Telegram. In groups, several people talk; each message names its "
            "sender's user id. " + _FORMATTING[settings.parse_mode]
        ),
        reply_output="telegram:send",
    )


def _outputs(accounts: _Accounts, settings: TelegramSettings) -> list[Output]:
    """``telegram:send`` (whole, or ``live``), ``telegram:photo`` and ``telegram:document``,
    each sent through the bot of the conversation's account."""

    def reply_to(ctx: RunContext, client: TelegramClient, chat_id: int) -> int | None:
        trigger = reply_target(ctx, "message_id", where={"chat_id": chat_id})
        in_group = trigger is not None and trigger.get("chat_type") in ("group", "supergroup")
        if trigger is not None and client.settings.reply_in_groups and in_group:
            return int(trigger["message_id"])
        return None

    # RunContext is imported at run time: the decorator reads the handlers' type hints
    async def send(content: str, ctx: RunContext) -> dict[str, Any]:
        chat_id, client = ctx.context.args.chat_id, accounts.client(ctx.context.args.account)
        quote = reply_to(ctx, client, chat_id)
        ids = await client.send_text(chat_id, content, reply_to=quote, on_part=ctx.part_sent)
        voices = await _speak(client, chat_id, content, quote, ctx)
        return {"chat_id": chat_id, "message_ids": ids, **({"voice_message_ids": voices} if voices else {})}

    async def send_live(content: LiveText, ctx: RunContext) -> dict[str, Any]:
        """``live = true``: one message edited while the model writes, continued past 4096."""
        chat_id, client = ctx.context.args.chat_id, accounts.client(ctx.context.args.account)
        return await _deliver_live(client, client.settings, chat_id, reply_to(ctx, client, chat_id), content, ctx)

    async def send_file(content: str, ctx: RunContext, *, as_photo: bool) -> dict[str, Any]:
        chat_id, client = ctx.context.args.chat_id, accounts.client(ctx.context.args.account)
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


async def _speak(client: TelegramClient, chat_id: int, content: str, quote: int | None, ctx: RunContext) -> list[int]:
    """The reply spoken too, as voice messages after its text, when ``[voice]`` says so
    ([`hub.platform.speak()`][hub.platform.speak]). A voice message that fails is logged: the text went out."""
    ids: list[int] = []
    for clip in await speak(ctx, content):
        try:
            message_id = await client.send_voice(chat_id, clip, reply_to=quote)
        except SendFailed as e:
            log.warning("telegram: chat %s: a spoken reply was not sent: %s", chat_id, e)
            break
        if message_id is None:  # voice messages forbidden: the text is the reply
            break
        ids.append(message_id)
    return ids


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
    accounts: _Accounts, webhooks: dict[str, Webhook]
) -> Callable[[Callable[..., Awaitable[Any]], Hub], Awaitable[Callable[[], Awaitable[None]]]]:
    """The input's subscribe: an intake per account, each fed by its webhook on every worker
    (one of which sets it, under a lease), or by its poller on the one worker holding its
    lease (the leases are per bot: two accounts may be polled by two workers)."""

    async def subscribe(send_input: Callable[..., Awaitable[Any]], hub: Hub) -> Callable[[], Awaitable[None]]:
        intakes: list[Intake] = []
        tasks: list[asyncio.Task[Any]] = []
        for name, client in accounts.clients.items():
            settings = client.settings
            intake = Intake(client, settings, hub, send_input)
            intakes.append(intake)
            # the command menus, set at start by every worker (the same menus: harmless)
            tasks.append(hub.create_task(intake.commands.keep_registering(), name=f"{client.label}:commands"))
            webhook = webhooks.get(name)
            if webhook is not None:  # every worker answers POSTs; one sets the webhook
                webhook.receiver = intake
                keeper = hub.lease(f"telegram:webhook:{settings.bot_id()}", ttl=settings.lease_ttl)
                tasks.append(hub.create_task(keeper.hold(webhook.register), name=f"{client.label}:webhook"))
            else:  # one worker polls
                poller = Poller(client, settings, intake)
                keeper = hub.lease(f"telegram:poll:{settings.bot_id()}", ttl=settings.lease_ttl)
                tasks.append(hub.create_task(keeper.hold(poller.run), name=f"{client.label}:poll"))

        async def stop() -> None:
            for webhook in webhooks.values():
                webhook.receiver = None
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for intake in intakes:
                await intake.stop()

        return stop

    return subscribe

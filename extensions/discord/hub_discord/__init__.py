"""Discord (discord.py): context ``discord:channel``, output ``discord:message``.

The bot answers direct messages, mentions of it (or of its role) and replies to its
messages in guild channels, and every message in the ``channels`` it is told to watch;
it ignores its own messages by user id, and other bots unless ``answer_bots`` (a loop
guard bounds bot-to-bot exchanges even then). Each message is recorded in the hub's inbox
with ``platform_id = "discord:<message id>"`` before it is answered, so a gateway RESUME that
replays it, or a restart, never answers it twice. Replies are split at 2000 characters with
code fences balanced, sent in order through a rate-limiting Governor, the first part as a
reply to the message being answered, with @everyone and role pings disabled.

Needs the Message Content intent enabled in the developer portal (see docs/deploy-discord.md).

Several bots (``[extensions.discord.accounts.NAME]``): each account is a bot of its own
(gateway, governor, slash commands); a second account's channels are
``discord:channel:NAME/<channel id>`` and its replies go out through its bot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field

from hub import Context, Extension, Input, LiveText, Service, output
from hub.platform import ApprovalRequest, Approver, Resolve, SendFailed, account_key, quiet_loggers, split_account_key

from ._bot import (
    MAX_LENGTH,
    SAFE_MENTIONS,
    DiscordBot,
    DiscordStartError,
    ignore_reason,
    intents,
    start_error,
)
from ._messages import INVITE_PERMISSIONS, invite_url
from ._settings import MEDIA_HOSTS, DiscordChannel, DiscordSettings

__all__ = [
    "DiscordSettings",
    "DiscordChannel",
    "DiscordBot",
    "DiscordStartError",
    "extension",
    "ignore_reason",
    "intents",
    "INVITE_PERMISSIONS",
    "invite_url",
    "start_error",
    "MAX_LENGTH",
    "MEDIA_HOSTS",
    "SAFE_MENTIONS",
    "MessageAttributes",
]

_INSTRUCTIONS = (
    "This conversation is a Discord channel or direct message. Discord renders Markdown; "
    "long answers are split into several messages for you. Each input's user is the author's "
    "Discord user id; write <@ID> only to ping someone on purpose."
)


class MessageAttributes(BaseModel):
    """``discord:message``'s attribute: files to attach."""

    attach: str = Field(
        "",
        description="files to attach, comma-separated: media handles from action results "
        "(media:1) or https URLs on [media] url_hosts",
    )


def extension(settings: DiscordSettings, *, resolve: Resolve | None = None) -> Extension:
    """The Discord extension for ``[extensions.discord]``. ``resolve`` finds the addresses of
    attachment hosts (default: the system's resolver, public addresses only; tests route
    their fake CDN's name to it)."""
    quiet_loggers("discord")  # discord.py logs every gateway event at INFO
    bots = {name: DiscordBot(s, resolve=resolve, account=name) for name, s in settings.every_account()}

    def bot_of(ctx: Any) -> DiscordBot:
        account = ctx.context.args.account
        if account not in bots:
            known = ", ".join(repr(a) for a in bots if a) or "none"
            raise SendFailed("discord", account, f"no Discord account {account!r} (accounts: {known})")
        return bots[account]

    def parse_key(key: str) -> dict[str, Any]:
        account, channel_id = split_account_key(key)
        return {"account": account, "channel_id": channel_id}

    channel: Context[DiscordChannel, dict[str, Any]] = Context(
        type="discord:channel",
        schema=DiscordChannel,
        key=lambda a: account_key(a.account, str(a.channel_id)),
        parse_key=parse_key,
        description="A Discord channel, thread or direct message, keyed by channel id.",
        instructions=_INSTRUCTIONS,
        reply_output="discord:message",
    )

    async def whole(content: str, ctx: Any) -> dict[str, Any]:
        attrs = ctx.attributes
        names = [s.strip() for s in (attrs.attach if attrs is not None else "").split(",") if s.strip()]
        files = [await ctx.media.resolve(name) for name in names]  # a MediaError names the file and why
        bot = bot_of(ctx)
        data = await bot.send_message(content, ctx, files)
        if files:
            data["files"] = [{"name": f.name, "type": f.mime, "size": f.size} for f in files]
        voices = await bot.send_voice(content, ctx)  # [voice]: spoken too, after the text
        if voices:
            data["voice_message_ids"] = voices
        return data

    async def live(content: LiveText, ctx: Any) -> dict[str, Any]:
        """``live = true``: one message edited in place while the model writes."""
        attrs = ctx.attributes
        if attrs is None or not attrs.attach.strip():
            return await bot_of(ctx).send_live(content, ctx)
        # files ride on the message itself, so a reply that attaches some is sent whole
        # when it closes, as with live = false
        return await whole(await content.final(), ctx)

    message = output(
        type="discord:message",
        context="discord:channel",
        attributes=MessageAttributes,
        description="Send a message to this Discord channel (Markdown), with files if attach names them.",
        instructions=(
            "Replies to the message you are answering. Any length: it is split at 2000 "
            'characters, code blocks kept whole. attach="media:1" sends a file an action returned.'
        ),
        live=settings.live,
    )(live if settings.live else whole)

    return Extension(
        name="discord",
        contexts=[channel],
        outputs=[message],
        inputs=[
            Input(
                type="discord:gateway",
                subscribe=_subscriber(list(bots.values())),
                description="Messages from the Discord gateway.",
                fetch=bots[""].fetch,  # from Discord's CDN by URL: any account's bot fetches it alike
            )
        ],
        services=[Service(name=bot.label, start=bot.start, stop=bot.stop) for bot in bots.values()],
        description="Discord bot: DMs, mentions and watched channels.",
        approver=_AccountApprover(bot_of),
    )


def _subscriber(
    bots: list[DiscordBot],
) -> Callable[[Callable[..., Awaitable[Any]], Any], Awaitable[Callable[[], Awaitable[None]]]]:
    """The input's subscribe: every account's listener, stopped together."""

    async def subscribe(send: Callable[..., Awaitable[Any]], hub: Any) -> Callable[[], Awaitable[None]]:
        stops = [await bot.subscribe(send, hub) for bot in bots]

        async def stop() -> None:
            await asyncio.gather(*(s() for s in stops))

        return stop

    return subscribe


class _AccountApprover(Approver):
    """Asks through the bot of the conversation's account (each bot has its own buttons)."""

    def __init__(self, bot_of: Callable[[Any], DiscordBot]) -> None:
        self.bot_of = bot_of

    async def ask(self, request: ApprovalRequest, ctx: Any) -> None:
        await self.bot_of(ctx).approver.ask(request, ctx)

    async def settled(self, request: ApprovalRequest, message: str, ctx: Any) -> None:
        await self.bot_of(ctx).approver.settled(request, message, ctx)

"""One Discord connection: the client's lifecycle, the listener and the sender.

`DiscordBot` is three things the extension declares, sharing one ``discord.Client``:
the service (login, gateway, close), the input (each MESSAGE_CREATE checked, recorded through
``send`` and answered by a run) and the ``discord:message`` output (split, paced and retried
through a [`Governor`][hub.platform.Governor]). Deciding whether to answer is `ignore_reason()`,
pure over the message (in `_messages`, with the output's limits); acting on it is
`DiscordBot._handle()`. Start errors are worded in `_errors`.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import io
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
import discord

from hub import MediaFile, MediaPart
from hub.platform import (
    DEFAULT_ACCOUNT,
    AllowList,
    AudioClip,
    Backoff,
    Governor,
    LiveMessage,
    MediaHosts,
    PermanentSendError,
    PoisonUpdates,
    RateLimit,
    RateLimited,
    Resolve,
    SendFailed,
    TransientSendError,
    TypingIndicator,
    account_key,
    admit_private,
    fetch_url,
    human_size,
    live_drafts,
    reply_target,
    speak,
    split_message,
)

from ._approvals import DiscordApprover, answer_press, is_press
from ._commands import DiscordCommands
from ._errors import DiscordStartError, _retry_after, start_error
from ._messages import (
    CONTEXT,
    MAX_FILES,
    MAX_LENGTH,
    MAX_UPLOAD_BYTES,
    OUTPUT,
    SAFE_MENTIONS,
    ignore_reason,
    intents,
    invite_url,
    media_of,
    message_text,
)
from ._settings import MEDIA_HOSTS, DiscordSettings

if TYPE_CHECKING:
    from hub import Hub, LiveText, RunContext, Submission

__all__ = [
    "DiscordBot",
    "DiscordStartError",
    "ignore_reason",
    "start_error",
    "MAX_LENGTH",
    "SAFE_MENTIONS",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

PARK_AFTER = 3
"""Failures (not the store's) after which a message is parked in the inbox instead of retried."""
MAX_WAITING = 10_000
"""Messages held in memory while one cannot be recorded (a store outage); past it, each
new one is logged as not taken (with its ids) instead of growing memory without bound."""


class _Client(discord.Client):
    """discord.Client whose events go to the `DiscordBot`."""

    def __init__(self, bot: DiscordBot, **options: Any) -> None:
        # A text bot: no voice, so no warning that voice's optional packages are missing.
        discord.VoiceClient.warn_nacl = False
        discord.VoiceClient.warn_dave = False
        super().__init__(**options)
        self._bot = bot

    async def on_ready(self) -> None:
        self._bot._up(self, True)
        self._bot._on_ready(self)

    async def on_resumed(self) -> None:
        self._bot._up(self, True)
        log.info("discord: gateway session resumed")

    async def on_disconnect(self) -> None:
        self._bot._up(self, False)
        if not self.is_closed():
            log.warning("discord: disconnected from the gateway; reconnecting")

    async def on_message(self, message: discord.Message) -> None:
        self._bot._on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        # a press of an approval's button (slash commands are the command tree's)
        if is_press(interaction) and self._bot._hub is not None:
            await answer_press(interaction, self._bot._hub)


class DiscordBot:
    """The service, the listener and the sender of the Discord extension."""

    def __init__(
        self, settings: DiscordSettings, *, resolve: Resolve | None = None, account: str = DEFAULT_ACCOUNT
    ) -> None:
        self.settings = settings
        self.account = account
        # what health, metrics and logs call this bot: "discord", or "discord/ACCOUNT"
        self.label = f"discord/{account}" if account else "discord"
        self.client: _Client | None = None
        # attachments come only from Discord's media hosts (and the config's), at public
        # addresses; ``resolve`` is a test's way to its loopback fake
        hosts = (*MEDIA_HOSTS, *settings.media_hosts)
        self.media_hosts = MediaHosts(hosts) if resolve is None else MediaHosts(hosts, resolve)
        self.governor = Governor(
            self.label,
            per_chat=RateLimit(*settings.channel_rate),
            global_=RateLimit(*settings.global_rate),
            max_attempts=settings.send_attempts,
            max_wait=settings.send_max_wait,
        )
        self.guard = settings.loop_guard()
        self._guilds = AllowList(settings.allowed_guilds)
        self._channels = AllowList(settings.allowed_channels)
        self._users = AllowList(settings.allowed_users)
        self._answer_all = frozenset(settings.channels)
        self._hub: Hub | None = None
        self._ready: set[int] = set()  # ids of this worker's connected clients (see _up)
        self._gateway: asyncio.Task[None] | None = None
        self._gateway_error: BaseException | None = None
        self._connected: asyncio.Event | None = None
        # Messages arrive from the moment the gateway connects; the input starts taking them
        # only after the hub has re-queued what a crash left. They wait here, in order.
        self._incoming: asyncio.Queue[discord.Message | None] | None = None
        self._accepting = False
        self._send: Callable[..., Awaitable[Submission]] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._retrying: discord.Message | None = None  # the message being retried, if any
        self.typing: TypingIndicator | None = None
        self._shards: list[asyncio.Task[None]] = []  # shard_count > 0: each under its lease
        self.shards: dict[int, _Client] = {}  # the shards this worker has connected, by id
        self.commands = DiscordCommands(self)  # the hub's commands as slash commands
        self.approver = DiscordApprover(self)  # approvals asked with buttons (hub_discord/_approvals.py)
        self._sync: asyncio.Task[None] | None = None

    # --- the service ----------------------------------------------------------------------

    async def start(self, hub: Hub) -> None:
        """Log in, connect the gateway and wait until it is ready.

        Raises:
            DiscordStartError: the token was rejected, a privileged intent is not enabled,
                or the gateway did not become ready within ``ready_timeout``.
        """
        if self.client is not None:
            return
        self._hub = hub
        # Discord shows "typing" for 10 s: renewed every 8 while a run for the channel goes on
        self.typing = TypingIndicator(self.label, self._show_typing, create_task=hub.create_task, interval=8.0)
        self.governor.report_to(hub)
        self._incoming = asyncio.Queue()
        self._connected = asyncio.Event()
        self._gateway_error = None
        self._accepting = True
        client = self.client = _Client(
            self,
            intents=intents(),
            guild_ready_timeout=self.settings.guild_ready_timeout,
            # Waits longer than this come back to the Governor as RateLimited instead of
            # blocking inside discord.py (30 s is the least discord.py accepts).
            max_ratelimit_timeout=30.0,
            allowed_mentions=SAFE_MENTIONS,
            chunk_guilds_at_startup=False,
        )
        tree = self.commands.tree(client)  # before the gateway: an interaction may come with READY
        try:
            await self._login(client)
            if self.settings.shard_count:
                # this client only sends (REST) and syncs the commands; the gateway is in
                # shards, each connected by the worker that holds its lease
                self._sync = hub.create_task(self.commands.sync(tree), name="discord:commands")
                self._start_shards(hub, client)
                return
            self._gateway = hub.create_task(self._run_gateway(client), name="discord:gateway")
            waiter = asyncio.ensure_future(self._connected.wait())
            try:
                await asyncio.wait(
                    {waiter, self._gateway},
                    timeout=self.settings.ready_timeout,
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                waiter.cancel()
            if not self._connected.is_set():
                if self._gateway_error is not None:
                    raise start_error(self._gateway_error) from self._gateway_error
                raise DiscordStartError(
                    f"the Discord gateway was not ready within {self.settings.ready_timeout:g}s (ready_timeout)"
                )
            self._sync = hub.create_task(self.commands.sync(tree), name="discord:commands")
        except BaseException:
            await self.stop()
            raise

    async def _login(self, client: _Client) -> None:
        try:
            await client.login(self.settings.token.get_secret_value())
        except discord.LoginFailure as e:
            raise start_error(e) from e
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            raise DiscordStartError(f"cannot reach Discord to log in: {e or type(e).__name__}") from e
        except discord.HTTPException as e:
            raise DiscordStartError(f"Discord refused the login: {e.status} {e.text}") from e

    async def _run_gateway(self, client: _Client) -> None:
        """discord.py's connection loop; it reconnects and resumes by itself."""
        try:
            await client.connect(reconnect=True)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._gateway_error = e
            if self._connected is not None and self._connected.is_set():
                log.error("discord: the gateway connection ended: %s", start_error(e))
        else:
            if not client.is_closed():
                log.warning("discord: the gateway connection ended")

    def _start_shards(self, hub: Hub, client: _Client) -> None:
        assert client.user is not None  # logged in
        count = self.settings.shard_count
        for shard in range(count):
            keeper = hub.lease(f"discord:shard:{client.user.id}:{shard}", ttl=self.settings.lease_ttl)
            work = functools.partial(self._run_shard, shard, count)
            self._shards.append(hub.create_task(keeper.hold(work), name=f"discord:shard:{shard}"))

    async def _run_shard(self, shard: int, count: int) -> None:
        """One shard's gateway connection, while this worker holds the shard's lease: it
        reconnects by itself, and after a failure it is retried with a growing delay."""
        backoff = Backoff(first=1.0, most=60.0, jitter=0.2)
        while True:
            client = _Client(
                self,
                intents=intents(),
                guild_ready_timeout=self.settings.guild_ready_timeout,
                max_ratelimit_timeout=30.0,
                allowed_mentions=SAFE_MENTIONS,
                chunk_guilds_at_startup=False,
                shard_id=shard,
                shard_count=count,
            )
            self.commands.tree(client)  # this shard's interactions are dispatched by its own tree
            try:
                await self._login(client)
                self.shards[shard] = client
                log.info("discord: shard %d of %d: connecting", shard, count)
                connection = asyncio.ensure_future(client.connect(reconnect=True))
                try:
                    await asyncio.shield(connection)
                except asyncio.CancelledError:
                    # the lease is gone or the hub stops: close the connection as stop() does
                    # (close first, then let connect return) rather than cut it mid-event
                    await client.close()
                    await asyncio.gather(connection, return_exceptions=True)
                    raise
            except (DiscordStartError, discord.DiscordException, OSError, aiohttp.ClientError) as e:
                delay = backoff.next()
                log.error("discord: shard %d of %d failed (%s); retrying in %.0fs", shard, count, e, delay)
            else:
                delay = backoff.next()
                log.warning("discord: shard %d of %d: the gateway connection ended; reconnecting", shard, count)
            finally:
                self.shards.pop(shard, None)
                await client.close()
                self._up(client, False)
            await asyncio.sleep(delay)

    def _up(self, client: _Client, up: bool) -> None:
        """Count this worker's gateway connections (one, or one per shard held) that are up."""
        (self._ready.add if up else self._ready.discard)(id(client))
        if self._hub is not None:
            self._hub.metrics.platform_connected(self.label, len(self._ready))

    def _on_ready(self, client: _Client | None = None) -> None:
        if client is not None and client.shard_id is not None and self.settings.shard_count:
            log.info(
                "discord: shard %d of %d connected in %d guild(s)",
                client.shard_id,
                self.settings.shard_count,
                len(client.guilds),
            )
            return
        client = self.client
        if client is None or client.user is None:
            return
        log.info(
            "discord: connected as %s (%s) in %d guild(s)",
            client.user,
            client.user.id,
            len(client.guilds),
        )
        if not client.guilds and client.application_id is not None:  # a new bot: say how to add it
            log.warning("discord: the bot is in no server yet; invite it: %s", invite_url(client.application_id))
        if self._connected is not None:
            self._connected.set()

    async def stop(self) -> None:
        """Close the client (the gateway and its HTTP session) and end the background tasks."""
        self._accepting = False
        client, self.client = self.client, None
        if client is not None:
            await client.close()
            self._up(client, False)
        if self.typing is not None:
            await self.typing.stop()
        tasks = [t for t in (self._gateway, self._sync, *self._shards) if t is not None]
        self._gateway = self._sync = None
        self._shards = []
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # --- the input --------------------------------------------------------------------------

    async def subscribe(self, send: Callable[..., Awaitable[Submission]], hub: Hub) -> Callable[[], Awaitable[None]]:
        """Take messages (those queued since the gateway connected first); returns the stop."""
        if self._incoming is None:
            raise DiscordStartError("the discord service is not started")
        self._send = send
        self._listener = hub.create_task(self._listen(self._incoming), name="discord:listener")
        return self._unsubscribe

    async def _unsubscribe(self) -> None:
        """Take no more messages; record the ones already received, so none is lost."""
        self._accepting = False
        listener, self._listener = self._listener, None
        if listener is None or listener.done() or self._incoming is None:
            return
        self._incoming.put_nowait(None)
        try:
            await asyncio.wait_for(asyncio.shield(listener), timeout=5.0)
        except TimeoutError:
            waiting = self._incoming.qsize() - 1 + (self._retrying is not None)  # less the stop's None
            log.error("discord: %d received message(s) not recorded at shutdown", waiting)
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)

    def _on_message(self, message: discord.Message) -> None:
        if not self._accepting or self._incoming is None:
            return
        if self._incoming.qsize() >= MAX_WAITING:  # the store is down for long: say what is lost
            log.error(
                "discord: message %s in channel %s from %s not taken: %d messages already wait for the store",
                message.id,
                message.channel.id,
                message.author.id,
                MAX_WAITING,
            )
            return
        self._incoming.put_nowait(message)

    async def _listen(self, incoming: asyncio.Queue[discord.Message | None]) -> None:
        """Take the messages in order. The gateway never delivers a message again, so one
        that cannot be recorded is retried here, with backoff, the later ones waiting
        behind it (a database outage delays them, loses none); one that fails
        `PARK_AFTER` times for a reason of its own is parked in the inbox."""
        assert self._hub is not None
        poison = PoisonUpdates(self.label, self._hub.inbox, park_after=PARK_AFTER, redactor=self._hub.redactor)
        backoff = Backoff(first=0.5, most=30.0, jitter=0.2)
        while (message := await incoming.get()) is not None:
            key = f"discord:{message.id}"
            while True:
                try:
                    await self._handle(message)
                except Exception as e:
                    try:
                        parked = await poison.failed(
                            key,
                            e,
                            context=f"{CONTEXT}:{account_key(self.account, str(message.channel.id))}",
                            type=CONTEXT,
                            content=message.content,
                            meta={"message_id": str(message.id), "channel_id": str(message.channel.id)},
                        )
                    except Exception as park_error:  # the store cannot park it either: retried
                        e, parked = park_error, False
                    if parked:
                        break
                    delay = backoff.next()
                    log.warning(
                        "discord: message %s in channel %s was not recorded (%s: %s); retrying in %.1fs "
                        "(%d more waiting)",
                        message.id,
                        message.channel.id,
                        type(e).__name__,
                        e,
                        delay,
                        incoming.qsize(),
                    )
                    self._retrying = message
                    await asyncio.sleep(delay)
                else:
                    poison.succeeded(key)
                    backoff.reset()
                    break
            self._retrying = None

    async def _handle(self, message: discord.Message) -> None:
        client, send = self.client, self._send
        if client is None or client.user is None or send is None:
            return
        reason = ignore_reason(
            message,
            client.user,
            self.settings,
            guilds=self._guilds,
            channels=self._channels,
            users=self._users,
            answer_all=self._answer_all,
        )
        text = message_text(message) if reason is None else ""
        media = media_of(message) if reason is None else []
        if reason is None and not text and not media:
            reason = "no text"
        from_bot = message.author.bot or message.webhook_id is not None
        # two bots in one channel see the same message: each account answers its own copy
        platform_id = f"discord:{account_key(self.account, str(message.id))}"
        if reason is None and from_bot and self._hub is not None:
            # a replayed bot message must not use up one of the loop guard's turns
            if await self._hub.received(platform_id):
                reason = "already recorded"
        if reason is None and self.guard is not None and not self.guard.allow(message.channel.id, from_bot=from_bot):
            reason = f"loop guard: {self.guard.max_turns} answers to bots within {self.guard.window:g}s"
        if reason is not None:
            log.debug("discord: message %s ignored: %s", message.id, reason)
            return
        if message.guild is None and not await self._private_allows(message):
            return
        channel_id = message.channel.id
        sub = await send(
            CONTEXT,
            {"channel_id": channel_id, "account": self.account},
            text,
            user=str(message.author.id),
            platform_id=platform_id,
            meta={
                "message_id": str(message.id),
                "channel_id": str(channel_id),
                "guild_id": str(message.guild.id) if message.guild else None,
                "author_name": message.author.display_name,
                "user_name": message.author.display_name,
                "user_handle": message.author.name,
                "author_bot": from_bot,
            },
            media=media,
        )
        if sub.duplicate:
            return
        if self.settings.typing and self.typing is not None:
            self.typing.watch(channel_id, sub.result)

    async def _private_allows(self, message: discord.Message) -> bool:
        """``dm_policy`` in a DM; an unknown user under ``"pairing"`` is sent the code, once,
        in the background (the gateway's events go on meanwhile)."""
        hub = self._hub
        if hub is None:
            return False
        client = self.client
        send = None
        if client is not None:
            channel_id = message.channel.id
            channel = client.get_partial_messageable(channel_id)

            async def send(text: str) -> Any:  # through the governor: paced, retried
                return await self.governor.send(channel_id, lambda: self._post(channel, text, None))

        return await admit_private(
            hub.access,
            hub.create_task,
            "discord",
            self.settings,
            message.author.id,
            send=send,
            user_name=message.author.display_name,
            user_handle=message.author.name,
        )

    # --- typing -------------------------------------------------------------------------

    async def _show_typing(self, channel_id: int) -> None:
        if self.client is not None:
            await self.client.get_partial_messageable(channel_id).typing()

    # --- the output -----------------------------------------------------------------------

    async def fetch(self, part: MediaPart, max_bytes: int) -> bytes:
        """An attachment's bytes from its CDN URL, at most ``max_bytes`` (capped while read),
        only from Discord's media hosts: a message cannot make the hub fetch from elsewhere
        (the loopback, a cloud's metadata address)."""
        return await fetch_url(part.ref, max_bytes=max_bytes, name=part.name, hosts=self.media_hosts)

    async def send_message(self, content: str, ctx: RunContext, files: list[MediaFile] | None = None) -> dict[str, Any]:
        """Send ``content`` to the run's channel: split at 2000 characters with code fences
        balanced, in order, the first part as a reply to the message being answered;
        ``files`` ride on the last part (at most 10, each within a bot's upload limit).

        Raises:
            SendFailed: a part could not be sent; the error says how many went out before.
        """
        channel_id = int(ctx.context.args.channel_id)
        files = files or []
        pending = self.commands.pending_for(ctx)
        if pending is not None and not files:  # the answer to a slash command goes back through it
            return await self.commands.answer(pending, content, ctx)
        if len(files) > MAX_FILES:
            raise SendFailed("discord", channel_id, f"{len(files)} files: a message takes at most {MAX_FILES}")
        for f in files:
            if f.size > MAX_UPLOAD_BYTES:
                raise SendFailed(
                    "discord",
                    channel_id,
                    f"{f.name} is {human_size(f.size)}, over Discord's "
                    f"{human_size(MAX_UPLOAD_BYTES)} upload limit for bots",
                )
        parts = split_message(content, MAX_LENGTH)
        if not parts and files:
            parts = [""]
        if not parts:
            return {"message_ids": []}
        client = self.client
        if client is None or client.is_closed():
            raise SendFailed("discord", channel_id, "the Discord client is not connected")
        channel = client.get_partial_messageable(channel_id)
        reply_to = _reply_target(ctx, channel_id)
        ids: list[str] = []
        for i, part in enumerate(parts):
            ref = None
            if i == 0 and reply_to is not None:
                ref = discord.MessageReference(message_id=reply_to, channel_id=channel_id, fail_if_not_exists=False)
            attach = files if i == len(parts) - 1 else []
            try:
                sent = await self.governor.send(channel_id, functools.partial(self._post, channel, part, ref, attach))
            except SendFailed as e:
                if ids:
                    raise SendFailed(
                        "discord",
                        channel_id,
                        f"{e.reason} (part {i + 1} of {len(parts)}; parts sent: {', '.join(ids)})",
                    ) from e
                raise
            ids.append(str(sent.id))
            await ctx.part_sent(i, str(sent.id))  # durable: a restart will not send it again
        data: dict[str, Any] = {"message_ids": ids}
        if reply_to is not None:
            data["reply_to"] = str(reply_to)
        return data

    async def send_voice(self, content: str, ctx: RunContext) -> list[str]:
        """The reply spoken too, after its text, when ``[voice]`` says so
        ([`hub.platform.speak()`][hub.platform.speak]): each part a voice message (flag IS_VOICE_MESSAGE, with
        its duration and waveform), or an audio file where the bot may not send voice
        messages. A part that fails is logged and ends the speaking: the text went out."""
        clips = await speak(ctx, content)
        client = self.client
        if not clips or client is None or client.is_closed():
            return []
        channel_id = int(ctx.context.args.channel_id)
        channel = client.get_partial_messageable(channel_id)
        ids: list[str] = []
        as_file = False
        for clip in clips:
            try:
                try:
                    post = functools.partial(self._post_voice, client, channel, clip, as_file=as_file)
                    ids.append(await self.governor.send(channel_id, post))
                except SendFailed as e:
                    if as_file:
                        raise
                    log.info("discord: channel %s takes no voice message (%s): sent as an audio file", channel_id, e)
                    as_file = True
                    post = functools.partial(self._post_voice, client, channel, clip, as_file=True)
                    ids.append(await self.governor.send(channel_id, post))
            except SendFailed as e:
                log.warning("discord: channel %s: a spoken reply was not sent: %s", channel_id, e)
                break
        return ids

    @staticmethod
    async def _post_voice(
        client: discord.Client, channel: discord.PartialMessageable, clip: AudioClip, *, as_file: bool
    ) -> str:
        """One voice message (discord.py sends none itself: its attachment's ``duration_secs``
        and ``waveform`` and the message flag are set here), or the clip as an audio file."""
        if as_file:
            file = discord.File(io.BytesIO(clip.data), filename="reply.ogg")
            return str((await _mapped(channel.send(file=file, allowed_mentions=SAFE_MENTIONS))).id)
        flags = discord.MessageFlags()
        flags.voice = True
        with discord.http.handle_message_parameters(file=_VoiceFile(clip), flags=flags) as params:
            data = await _mapped(client.http.send_message(channel.id, params=params))
        return str(data["id"])

    async def send_live(self, content: LiveText, ctx: RunContext) -> dict[str, Any]:
        """``live = true``: one message edited while the model writes, continued past 2000
        characters in new messages, the first a reply to the message being answered.

        Raises:
            SendFailed: the first message could not be sent.
        """
        channel_id = int(ctx.context.args.channel_id)
        pending = self.commands.pending_for(ctx)
        if pending is not None:  # a slash command's answer: whole, through the interaction
            return await self.commands.answer(pending, await content.final(), ctx)
        client = self.client
        if client is None or client.is_closed():
            raise SendFailed("discord", channel_id, "the Discord client is not connected")
        channel = client.get_partial_messageable(channel_id)
        reply_to = _reply_target(ctx, channel_id)
        refs = [
            discord.MessageReference(message_id=reply_to, channel_id=channel_id, fail_if_not_exists=False)
            if reply_to is not None
            else None
        ]

        async def send(text: str) -> str:
            ref, refs[0] = refs[0], None  # the first message only
            sent = await self.governor.send(channel_id, lambda: self._post(channel, text, ref))
            return str(sent.id)

        async def edit(message_id: str, text: str) -> None:
            message = channel.get_partial_message(int(message_id))
            await self.governor.send(
                channel_id, lambda: _mapped(message.edit(content=text, allowed_mentions=SAFE_MENTIONS))
            )

        async def delete(message_id: str) -> None:
            message = channel.get_partial_message(int(message_id))
            await self.governor.send(channel_id, lambda: _mapped(message.delete()))

        result = await LiveMessage(
            send=send,
            edit=edit,
            delete=delete,
            limit=MAX_LENGTH,
            interval=self.settings.live_interval,
            on_part=ctx.part_sent,
            adopt=live_drafts(ctx, OUTPUT),
        ).deliver(content)
        data: dict[str, Any] = {"message_ids": result.message_ids, "edits": result.edits}
        if reply_to is not None and result.message_ids:
            data["reply_to"] = str(reply_to)
        return data

    @staticmethod
    async def _post(
        channel: discord.PartialMessageable,
        text: str,
        ref: discord.MessageReference | None,
        files: list[MediaFile] | None = None,
    ) -> discord.Message:
        """One message; discord.py's errors mapped onto the Governor's."""
        # a discord.File is consumed by a send: made anew for each attempt
        kw: dict[str, Any] = (
            {"files": [discord.File(io.BytesIO(f.data), filename=f.name) for f in files]} if files else {}
        )
        if ref is not None:
            kw["reference"] = ref
        return await _mapped(channel.send(text or None, allowed_mentions=SAFE_MENTIONS, **kw))


class _VoiceFile(discord.File):
    """An OGG/Opus clip as a voice message's attachment: its length and waveform go with it."""

    def __init__(self, clip: AudioClip) -> None:
        super().__init__(io.BytesIO(clip.data), filename="voice-message.ogg")
        self.seconds = round(clip.seconds, 2)
        self.waveform = base64.b64encode(clip.peaks or bytes(1)).decode("ascii")

    def to_dict(self, index: int) -> dict[str, Any]:
        return {**super().to_dict(index), "duration_secs": self.seconds, "waveform": self.waveform}


async def _mapped(request: Awaitable[T]) -> T:
    """One REST request (a send, an edit, a delete); discord.py's errors mapped onto the Governor's."""
    try:
        return await request
    except discord.RateLimited as e:  # longer than max_ratelimit_timeout
        raise RateLimited(e.retry_after) from e
    except discord.HTTPException as e:
        detail = f"{e.status} {e.text or e.response.reason}".strip()
        if e.status == 429:
            raise RateLimited(_retry_after(e), message=f"rate limited: {detail}") from e
        if e.status >= 500:
            raise TransientSendError(detail) from e
        raise PermanentSendError(detail) from e
    except (TimeoutError, aiohttp.ClientError, OSError) as e:
        raise TransientSendError(f"{type(e).__name__}: {e}") from e


def _reply_target(ctx: RunContext, channel_id: int) -> int | None:
    """The newest message of this run's inputs, unless an earlier output already replied to it."""
    meta = reply_target(ctx, "message_id", where={"channel_id": channel_id}, once_for=OUTPUT)
    return int(meta["message_id"]) if meta is not None else None

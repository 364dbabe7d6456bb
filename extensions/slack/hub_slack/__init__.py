"""Slack (slack-bolt, slack-sdk): contexts ``slack:channel`` and ``slack:thread``, input
``slack:events``, output ``slack:message``.

The bot answers direct messages, mentions of it in channels, and every reply in a thread it
answers in (and every message in the ``channels`` it is told to watch). A direct message
channel is one conversation (``slack:channel:D123``); in a channel each thread is its own
(``slack:thread:C123/1700000000.000100``), a mention at the top of a channel starting one
under itself. Replies go in the thread they were asked in, in mrkdwn with a plain fallback,
split at 3000 characters, paced under Slack's tiers; ``live = true`` edits one message with
``chat.update`` while the model writes. Files come in through ``files.info`` and are sent
with ``files_upload_v2``. ``/help``, ``/new``, ``/stop`` are slash commands.

Events arrive by Socket Mode (``app_token``; one worker of several holds the connection,
the lease ``slack:socket:<bot user id>``), or with ``signing_secret`` set through the Events
API on the hub's ``[http]`` endpoint at ``events_path``. Each message is recorded in the
hub's inbox (``platform_id = "slack:<channel>:<ts>"``) before Slack is told it arrived, so a
redelivery or a restart never answers it twice.

Modules: ``_settings`` (the config table), ``_events`` (which events to answer, and where:
pure), ``_mrkdwn`` (Markdown to mrkdwn and plain text), ``_client`` (the Web API: messages,
edits, uploads, downloads, under Governors), ``_intake`` (an event into the hub), ``_commands``
(slash commands), ``_signature`` (the Events API's signatures), ``_bolt`` (the bolt app,
Socket Mode and the route).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from hub import Context, Extension, Input, LiveText, MediaPart, RunContext, Service, output
from hub.platform import (
    DEFAULT_ACCOUNT,
    LiveMessage,
    Resolve,
    SendFailed,
    account_key,
    live_drafts,
    quiet_loggers,
    reply_target,
    split_account_key,
    split_message,
    split_off_loop,
)

from ._approvals import SlackApprover
from ._bolt import Bolt
from ._client import MAX_LENGTH, SlackClient, SlackStartError, mrkdwn_len
from ._events import CHANNEL, OUTPUT, THREAD, Ignored, Inbound, classify
from ._intake import Intake
from ._mrkdwn import to_mrkdwn, to_plain
from ._settings import MEDIA_HOSTS, SlackChannel, SlackSettings, SlackThread
from ._signature import SIGNATURE_HEADER, TIMESTAMP_HEADER, SlackSignature

if TYPE_CHECKING:
    from hub import Hub

__all__ = [
    "SlackSettings",
    "SlackChannel",
    "SlackThread",
    "SlackClient",
    "SlackStartError",
    "SlackSignature",
    "Inbound",
    "Ignored",
    "classify",
    "to_mrkdwn",
    "to_plain",
    "extension",
    "MAX_LENGTH",
    "MEDIA_HOSTS",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "MessageAttributes",
]

log = logging.getLogger("hub_slack")

_INSTRUCTIONS = (
    "This conversation is on Slack. Write Markdown (it is shown as Slack's mrkdwn); long "
    "answers are split into several messages for you. Each input's user is the author's Slack "
    "user id; write <@ID> only to ping someone on purpose."
)


class MessageAttributes(BaseModel):
    """``slack:message``'s attribute: files to attach."""

    attach: str = Field(
        "",
        description="files to attach, comma-separated: media handles from action results "
        "(media:1) or https URLs on [media] url_hosts",
    )


def _parse_channel(key: str) -> dict[str, str]:
    account, channel = split_account_key(key)
    return {"channel_id": channel, "account": account}


def _parse_thread(key: str) -> dict[str, str]:
    """``CHANNEL/THREAD_TS``, or ``ACCOUNT/CHANNEL/THREAD_TS`` on another account."""
    parts = key.split("/")
    account = parts.pop(0) if len(parts) == 3 else DEFAULT_ACCOUNT
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"a Slack thread is named CHANNEL/THREAD_TS (ACCOUNT/CHANNEL/THREAD_TS), not {key!r}")
    return {"channel_id": parts[0], "thread_ts": parts[1], "account": account}


class _Slack:
    """The service, the input and the output of one Slack bot (one account)."""

    def __init__(self, settings: SlackSettings, resolve: Resolve | None, account: str = DEFAULT_ACCOUNT) -> None:
        self.settings = settings
        self.client = SlackClient(settings, resolve=resolve, account=account)
        self.bolt = Bolt(self.client, settings)
        self.hub: Hub | None = None

    # --- the service ----------------------------------------------------------------------

    async def start(self, hub: Hub) -> None:
        """``auth.test`` (and in Socket Mode the app token), within ``ready_timeout``: a refused
        token stops ``hub run`` with one line."""
        self.hub = hub
        self.client.report_to(hub)
        try:
            async with asyncio.timeout(self.settings.ready_timeout):
                me = await self.client.sign_in()
                if self.settings.socket_mode:
                    await self.client.check_app_token(self.settings.app_token.get_secret_value())
        except TimeoutError as e:
            await self.client.close()
            raise SlackStartError(
                f"Slack's auth.test did not answer within {self.settings.ready_timeout:g}s (ready_timeout)"
            ) from e
        except BaseException:
            await self.client.close()
            raise
        self.bolt.build(hub)
        log.info("%s: signed in as %s (%s) in team %s", self.client.label, me.name, me.user_id, me.team_id)

    async def stop(self) -> None:
        await self.client.close()

    # --- the input ------------------------------------------------------------------------

    async def subscribe(self, send: Any, hub: Hub) -> Any:
        """Take events: by Socket Mode on the worker holding the lease, or by the route on every worker."""
        if self.client.identity is None or self.bolt.commands is None:
            raise SlackStartError("the slack service is not started")
        intake = Intake(self.client, self.settings, hub, send)
        self.bolt.intake = intake
        self.bolt.commands.intake = intake
        task = None
        if self.settings.socket_mode:
            keeper = hub.lease(f"slack:socket:{self.client.identity.user_id}", ttl=self.settings.lease_ttl)
            task = hub.create_task(keeper.hold(lambda: self.bolt.run_socket(hub)), name=f"{self.client.label}:socket")

        async def stop() -> None:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            self.bolt.intake = None
            if self.bolt.commands is not None:
                self.bolt.commands.intake = None

        return stop

    # --- the output -----------------------------------------------------------------------

    def _where(self, ctx: RunContext) -> tuple[str, str | None]:
        """The channel and the thread a reply goes to: the thread the conversation is, or
        (a DM) the thread the newest message was asked in."""
        args = ctx.context.args
        channel = str(args.channel_id)
        thread = getattr(args, "thread_ts", None)
        if thread is None:
            asked = reply_target(ctx, "ts", where={"channel_id": channel})
            if asked is not None and asked.get("thread_ts"):
                thread = str(asked["thread_ts"])
        return channel, thread

    async def send_whole(self, content: str, ctx: RunContext) -> dict[str, Any]:
        """The reply, split at Slack's limit, in order, in the thread asked in; files after it.

        Raises:
            SendFailed: a part could not be sent; the error says how many went out before.
        """
        channel, thread = self._where(ctx)
        attrs = ctx.attributes
        attach = attrs.attach if isinstance(attrs, MessageAttributes) else ""
        names = [s.strip() for s in attach.split(",") if s.strip()]
        files = [await ctx.media.resolve(name) for name in names]  # a MediaError names the file and why
        commands = self.bolt.commands
        pending = commands.pending_for(ctx) if commands is not None else None
        if pending is not None and commands is not None and not files:
            return await commands.answer(pending, content, channel)
        parts = await split_off_loop(_split, content)
        ids: list[str] = []
        for i, part in enumerate(parts):
            try:
                ids.append(await self.client.post(channel, part, thread_ts=thread))
            except SendFailed as e:
                if ids:
                    raise SendFailed(
                        "slack", channel, f"{e.reason} (part {i + 1} of {len(parts)}; parts sent: {', '.join(ids)})"
                    ) from e
                raise
            await ctx.part_sent(i, ids[-1])  # durable: a restart will not send it again
        data: dict[str, Any] = {"channel": channel, "thread_ts": thread, "message_ts": ids}
        if files:
            data["files"] = await self.client.upload(channel, files, thread_ts=thread)
        return data

    async def send_live(self, content: LiveText, ctx: RunContext) -> dict[str, Any]:
        """``live = true``: one message edited (``chat.update``) while the model writes,
        continued past the limit in new ones, in the thread asked in."""
        attrs = ctx.attributes
        commands = self.bolt.commands
        if (isinstance(attrs, MessageAttributes) and attrs.attach.strip()) or (
            commands is not None and commands.pending_for(ctx)
        ):
            # files go with the whole reply; a command's answer rides on its acknowledgement
            return await self.send_whole(await content.final(), ctx)
        channel, thread = self._where(ctx)

        async def send(text: str) -> str:
            return await self.client.post(channel, text, thread_ts=thread)

        async def edit(ts: str, text: str) -> None:
            await self.client.update(channel, ts, text)

        async def delete(ts: str) -> None:
            await self.client.delete(channel, ts)

        result = await LiveMessage(
            send=send,
            edit=edit,
            delete=delete,
            limit=MAX_LENGTH,
            length=mrkdwn_len,
            interval=self.settings.live_interval,
            on_part=ctx.part_sent,
            adopt=live_drafts(ctx, OUTPUT),
        ).deliver(content)
        return {"channel": channel, "thread_ts": thread, "message_ts": result.message_ids, "edits": result.edits}


def extension(settings: SlackSettings, *, resolve: Resolve | None = None) -> Extension:
    """The Slack extension for ``[extensions.slack]``. ``resolve`` finds the addresses of
    Slack's file hosts (default: the system's resolver, public addresses only; tests route
    their fake's names to it)."""
    quiet_loggers("slack_bolt", "slack_sdk", "hub_slack.bolt", "hub_slack.socket")
    bots = {name: _Slack(s, resolve, name) for name, s in settings.every_account()}

    def bot_of(ctx: RunContext) -> _Slack:
        account = ctx.context.args.account
        if account not in bots:
            known = ", ".join(repr(a) for a in bots if a) or "none"
            raise SendFailed("slack", account, f"no Slack account {account!r} (accounts: {known})")
        return bots[account]

    async def send_whole(content: str, ctx: RunContext) -> dict[str, Any]:
        return await bot_of(ctx).send_whole(content, ctx)

    async def send_live(content: LiveText, ctx: RunContext) -> dict[str, Any]:
        return await bot_of(ctx).send_live(content, ctx)

    channel: Context[SlackChannel, dict[str, Any]] = Context(
        type=CHANNEL,
        schema=SlackChannel,
        key=lambda a: account_key(a.account, a.channel_id),
        parse_key=_parse_channel,
        description="A Slack direct message channel (or a channel, outside its threads), keyed by channel id.",
        instructions=_INSTRUCTIONS,
        reply_output=OUTPUT,
    )
    thread: Context[SlackThread, dict[str, Any]] = Context(
        type=THREAD,
        schema=SlackThread,
        key=lambda a: account_key(a.account, f"{a.channel_id}/{a.thread_ts}"),
        parse_key=_parse_thread,
        description="A thread in a Slack channel, keyed CHANNEL/THREAD_TS.",
        instructions=_INSTRUCTIONS,
        reply_output=OUTPUT,
    )
    message = output(
        type=OUTPUT,
        attributes=MessageAttributes,
        enabled=lambda ctx: ctx.context.type in (CHANNEL, THREAD),
        description="Send a message to this Slack conversation (Markdown), with files if attach names them.",
        instructions=(
            "Goes in the thread you were asked in. Any length: it is split at 3000 characters, code "
            'blocks kept whole. attach="media:1" sends a file an action returned.'
        ),
        live=settings.live,
    )(send_live if settings.live else send_whole)
    return Extension(
        name="slack",
        contexts=[channel, thread],
        outputs=[message],
        inputs=[
            Input(
                type="slack:events",
                subscribe=_subscriber(list(bots.values())),
                description="Messages, mentions and slash commands from Slack.",
                fetch=_fetcher(bots),
            )
        ],
        services=[Service(name=b.client.label, start=b.start, stop=b.stop) for b in bots.values()],
        routes=[b.bolt.route() for b in bots.values() if not b.settings.socket_mode],
        approver=SlackApprover(lambda ctx: (bot_of(ctx).client, bot_of(ctx)._where(ctx))),
        description="Slack app (Socket Mode)." if settings.socket_mode else "Slack app (Events API).",
    )


def _subscriber(bots: list[_Slack]) -> Callable[[Any, Hub], Awaitable[Callable[[], Awaitable[None]]]]:
    """The input's subscribe: every account's events, stopped together."""

    async def subscribe(send: Any, hub: Hub) -> Callable[[], Awaitable[None]]:
        stops = [await b.subscribe(send, hub) for b in bots]

        async def stop() -> None:
            await asyncio.gather(*(s() for s in stops))

        return stop

    return subscribe


def _fetcher(bots: dict[str, _Slack]) -> Callable[[MediaPart, int], Awaitable[bytes]]:
    """A file of an inbound message, with the token of the bot that received it (files.info
    and the download need it): another account's refs are ``ACCOUNT/<file id>``."""

    async def fetch(part: MediaPart, max_bytes: int) -> bytes:
        account, ref = split_account_key(part.ref)
        return await bots[account].client.fetch(dataclasses.replace(part, ref=ref), max_bytes)

    return fetch


def _split(text: str) -> list[str]:
    """``text`` as blocks of at most MAX_LENGTH characters of mrkdwn (measured rendered)."""
    return split_message(text, MAX_LENGTH, length=mrkdwn_len)

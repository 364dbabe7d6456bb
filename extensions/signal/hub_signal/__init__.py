"""Signal (signal-cli-rest-api in json-rpc mode, over aiohttp): context ``signal:chat`` (a
direct chat, by the user's number or UUID, or a group, by its ``group.…`` id), input
``signal:receive``, output ``signal:message``.

The hub reads the API's receive websocket (``/v1/receive/{number}``), reconnecting with a
growing delay when it drops, and records each message in its inbox
(``platform_id = "signal:<author>:<timestamp>"``) before the user sees any sign of it (the
read receipt, "typing..."), so a redelivery is answered once and a crash after the record
answers after the restart. It answers every message of a direct chat, and in groups the
messages that mention the bot or quote it. Replies are text (split at 2,000 characters),
files (``base64_attachments``), a quote of the message answered, and reactions;
``/help``, ``/new`` and ``/stop`` are typed as text.

Modules: ``_settings`` (the config table, numbers and group ids), ``_events`` (a frame's
envelope: pure), ``_client`` (the REST API under a Governor, attachments in),
``_intake`` (a frame into the hub), ``_receiver`` (the websocket and its reconnects).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from hub import Context, Extension, Input, RunContext, Service, output
from hub.platform import SendFailed, reply_target, split_message

from ._client import JSON_RPC_MODES, MAX_LENGTH, SignalClient, SignalStartError
from ._events import CHAT, OUTPUT, ApiNotice, Ignored, Inbound, Me, Unreadable, read_frame
from ._intake import PARK_AFTER, Intake
from ._receiver import Receiver
from ._settings import GROUP_PREFIX, SignalChat, SignalSettings, group_id

if TYPE_CHECKING:
    from hub import Hub

__all__ = [
    "SignalSettings",
    "SignalChat",
    "SignalClient",
    "SignalStartError",
    "MessageAttributes",
    "Inbound",
    "Ignored",
    "ApiNotice",
    "Unreadable",
    "Me",
    "read_frame",
    "group_id",
    "extension",
    "MAX_LENGTH",
    "PARK_AFTER",
    "GROUP_PREFIX",
    "JSON_RPC_MODES",
]

log = logging.getLogger("hub_signal")

_INSTRUCTIONS = (
    "This conversation is on Signal: a direct chat with one person, or a group (where you are "
    "answering a message that mentions or quotes you). Keep answers plain: Signal shows **bold**, "
    "*italic*, ~strikethrough~ and `monospace`, not headings, tables or links in Markdown; long "
    "answers are split for you."
)


class MessageAttributes(BaseModel):
    """``signal:message``'s attributes: files to attach, and a reaction."""

    attach: str = Field(
        "", description="files to send with the text, comma-separated: media handles from action results (media:1)"
    )
    react: str = Field("", description="an emoji to react with to the message you answer (the text may be empty)")


class _Signal:
    """The service, the input and the output of one Signal number."""

    def __init__(self, settings: SignalSettings) -> None:
        self.settings = settings
        self.client = SignalClient(settings)
        self.me = Me(settings.number)

    async def start(self, hub: Hub) -> None:
        """The API answers, in json-rpc mode, with the bot's number, within ``ready_timeout``;
        else ``hub run`` stops with one line."""
        self.client.report_to(hub)
        try:
            async with asyncio.timeout(self.settings.ready_timeout):
                mode = await self.client.check()
        except TimeoutError as e:
            await self.client.close()
            raise SignalStartError(
                f"signal-cli-rest-api at {self.settings.url} did not answer within "
                f"{self.settings.ready_timeout:g}s (ready_timeout)"
            ) from e
        except BaseException:
            await self.client.close()
            raise
        log.info("signal: %s on signal-cli-rest-api at %s (%s)", self.settings.number, self.settings.url, mode)

    async def stop(self) -> None:
        await self.client.close()

    async def subscribe(self, send: Any, hub: Hub) -> Any:
        """Receive on the one worker that holds the lease ``signal:receive:<number>``."""
        intake = Intake(self.client, self.settings, hub, send, self.me)
        receiver = Receiver(self.client, self.settings, intake)
        keeper = hub.lease(f"signal:receive:{self.settings.number}", ttl=self.settings.lease_ttl)
        task = hub.create_task(keeper.hold(receiver.run), name="signal:receive")

        async def stop() -> None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await intake.stop()

        return stop

    async def send(self, content: str, ctx: RunContext) -> dict[str, Any]:
        """The reply, split at 2,000 characters, in order, the files with its last part, its
        first part quoting the message answered (``quote``); a reaction.

        Raises:
            SendFailed: a part could not be sent (the run's log has the parts that went out).
        """
        chat = str(ctx.context.args.chat)
        attrs = ctx.attributes
        attach = attrs.attach if isinstance(attrs, MessageAttributes) else ""
        react = attrs.react.strip() if isinstance(attrs, MessageAttributes) else ""
        files = tuple([await ctx.media.resolve(n.strip()) for n in attach.split(",") if n.strip()])
        data: dict[str, Any] = {"chat": chat}
        if react:
            data["reaction"] = await self._react(ctx, chat, react)
        quote = self._quote(ctx, chat)
        parts = split_message(content, MAX_LENGTH) if content.strip() else []
        if files and not parts:
            parts = [""]
        stamps: list[int] = []
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            stamps.append(
                await self.client.send(chat, part, files=files if last else (), quote=quote if i == 0 else None)
            )
            await ctx.part_sent(i, stamps[-1])  # durable: a restart will not send it again
        data["timestamps"] = stamps
        data["reply_to"] = quote["timestamp"] if quote and stamps else None
        if files and stamps:
            data["files"] = [{"name": f.name, "type": f.mime, "size": f.size} for f in files]
        return data

    async def _react(self, ctx: RunContext, chat: str, emoji: str) -> dict[str, Any] | None:
        """A reaction to the message answered; one that fails is logged, never the reply's end."""
        asked = reply_target(ctx, "timestamp", where={"chat": chat})
        if asked is None:
            return None
        author = str(asked.get("number") or asked["author"])
        try:
            await self.client.react(chat, emoji, author=author, timestamp=int(asked["timestamp"]))
        except SendFailed as e:
            log.warning("signal: the reaction %s in %s was not sent: %s", emoji, chat, e.reason)
            return {"emoji": emoji, "timestamp": asked["timestamp"], "sent": False}
        return {"emoji": emoji, "timestamp": asked["timestamp"], "sent": True}

    def _quote(self, ctx: RunContext, chat: str) -> dict[str, Any] | None:
        """The message the first reply of a run quotes, as ``quote`` asks (groups by default)."""
        policy = self.settings.quote
        if policy == "never" or (policy == "groups" and not chat.startswith(GROUP_PREFIX)):
            return None
        target = reply_target(ctx, "timestamp", where={"chat": chat}, once_for=OUTPUT)
        if target is None:
            return None
        author = target.get("number") or target.get("author")
        return {"timestamp": target["timestamp"], "author": author, "text": target.get("text") or ""}


def extension(settings: SignalSettings) -> Extension:
    """The Signal extension for ``[extensions.signal]``; nothing connects until the hub starts."""
    signal = _Signal(settings)
    chat: Context[SignalChat, dict[str, Any]] = Context(
        type=CHAT,
        schema=SignalChat,
        key=lambda a: a.chat,
        description="A Signal chat: a direct chat (the user's number, or UUID) or a group (group.…).",
        instructions=_INSTRUCTIONS,
        reply_output=OUTPUT,
    )
    message = output(
        type=OUTPUT,
        attributes=MessageAttributes,
        enabled=lambda ctx: ctx.context.type == CHAT,
        description="Send a message to this Signal chat, with files if attach names them, or a reaction.",
        instructions=(
            'Any length: it is split at 2000 characters. attach="media:1" sends a file an action returned; '
            'react="👍" reacts to the message you answer.'
        ),
    )(signal.send)
    return Extension(
        name="signal",
        contexts=[chat],
        outputs=[message],
        inputs=[
            Input(
                type="signal:receive",
                subscribe=signal.subscribe,
                description="Messages to the bot's Signal number (signal-cli-rest-api's websocket).",
                fetch=signal.client.fetch,
            )
        ],
        services=[Service(name="signal", start=signal.start, stop=signal.stop)],
        description="Signal through signal-cli-rest-api (json-rpc mode).",
    )

"""Matrix (matrix-nio): context ``matrix:room`` (one per room id), input ``matrix:sync``,
output ``matrix:message``.

The bot answers direct rooms (it and one other member), and in group rooms mentions of it
and replies to it, and every message in the ``rooms`` it is told to watch; it joins rooms
it is invited to (by ``allowed_users``, to ``allowed_rooms``, when those are set). Each
message is recorded in the hub's inbox with ``platform_id = "matrix:<event id>"`` before
it is answered, and the sync token is kept after each batch, so a restart resumes where
it stopped and never answers a message twice. Replies quote the message answered
(``m.in_reply_to``), carry an HTML body rendered from their Markdown beside the plain one,
are split under the homeserver's event size and paced through a Governor that honours
``M_LIMIT_EXCEEDED``; with ``live = true`` one message is edited (``m.replace``) while
the model writes. Files come and go through the content repository, under the hub's caps.

End-to-end encrypted rooms are not supported: the bot says so once in the room and in the
log (see docs/platforms/matrix.md for why).

Modules: ``_settings`` (the config table), ``_content`` (event content: HTML, replies,
edits, sizes), ``_events`` (which events to answer: pure), ``_client`` (nio's client, the
login and everything outbound), ``_intake`` (an event into the hub: access, the loop guard,
the inbox; invites), ``_sync`` (the sync loop and its kept token).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from hub import Context, Extension, Input, LiveText, MediaFile, RunContext, Service, output
from hub.platform import LiveMessage, live_drafts, quiet_loggers, reply_target

from ._approvals import MatrixApprover
from ._client import MatrixClient, map_error
from ._content import MAX_EVENT_BYTES, MAX_LENGTH, edit_content, message_content, to_html, wire_len
from ._events import Encrypted, Ignored, Inbound, classify
from ._intake import ENCRYPTED_NOTICE, Intake
from ._settings import MatrixRoom, MatrixSettings
from ._sync import TOKEN_KEY, Syncer

if TYPE_CHECKING:
    from hub import Hub

__all__ = [
    "MatrixSettings",
    "MatrixRoom",
    "MatrixClient",
    "MessageAttributes",
    "Inbound",
    "Ignored",
    "Encrypted",
    "classify",
    "map_error",
    "extension",
    "message_content",
    "edit_content",
    "to_html",
    "wire_len",
    "TOKEN_KEY",
    "ENCRYPTED_NOTICE",
    "MAX_LENGTH",
    "MAX_EVENT_BYTES",
]

log = logging.getLogger("hub_matrix")

_INSTRUCTIONS = (
    "This conversation is a Matrix room: a direct chat or a group room. Matrix clients render "
    "Markdown (it is sent as HTML, with the plain text beside it); long answers are split for "
    "you. Each input's user is the sender's Matrix id (@name:server)."
)


class MessageAttributes(BaseModel):
    """``matrix:message``'s attribute: files to send after the text."""

    attach: str = Field(
        "",
        description="files to send, comma-separated: media handles from action results "
        "(media:1) or https URLs on [media] url_hosts",
    )


def extension(settings: MatrixSettings) -> Extension:
    """The Matrix extension for ``[extensions.matrix]``; connects nothing until the hub starts."""
    quiet_loggers("nio")  # matrix-nio logs each request and each 429 it hands back
    # and each event it cannot parse, with its schema: _events judges them (debug lines)
    for name in ("nio.events", "nio.responses"):
        logging.getLogger(name).setLevel(logging.ERROR)
    client = MatrixClient(settings)
    approver = MatrixApprover(client)
    room: Context[MatrixRoom, dict[str, Any]] = Context(
        type="matrix:room",
        schema=MatrixRoom,
        key=lambda a: a.room_id,
        description="A Matrix room, direct or group, keyed by its room id (!abc:example.org).",
        instructions=_INSTRUCTIONS,
        reply_output="matrix:message",
    )

    def reply_to(ctx: RunContext, room_id: str) -> tuple[str | None, str | None]:
        """The event the first reply of a run quotes, and its sender (mentioned)."""
        target = reply_target(ctx, "event_id", where={"room_id": room_id}, once_for="matrix:message")
        if target is None:
            return None, None
        return str(target["event_id"]), target.get("sender")

    async def files_of(ctx: RunContext, room_id: str) -> list[MediaFile]:
        """The files ``attach`` names, read and checked against the homeserver's upload
        limit before anything is sent: a reply is not half sent for a file that cannot go."""
        attrs = ctx.attributes
        attach = attrs.attach if isinstance(attrs, MessageAttributes) else ""
        files = [await ctx.media.resolve(n.strip()) for n in attach.split(",") if n.strip()]  # MediaError: which, why
        for file in files:
            await client.check_upload(room_id, file)
        return files

    async def whole(content: str, ctx: RunContext) -> dict[str, Any]:
        room_id = ctx.context.args.room_id
        files = await files_of(ctx, room_id)
        quoted, sender = reply_to(ctx, room_id)
        ids: list[str] = []
        if content.strip():
            ids = await client.send_text(room_id, content, reply_to=quoted, mention=sender, on_part=ctx.part_sent)
        data: dict[str, Any] = {"room_id": room_id, "event_ids": ids, "reply_to": quoted}
        first_reply = None if ids else quoted
        sent = []
        for file in files:
            event_id = await client.send_file(room_id, file, reply_to=first_reply)
            first_reply = None
            sent.append({"event_id": event_id, "name": file.name, "type": file.mime, "size": file.size})
        if sent:
            data["files"] = sent
        return data

    async def live(content: LiveText, ctx: RunContext) -> dict[str, Any]:
        """``live = true``: one message edited in place (``m.replace``) while the model writes."""
        attrs = ctx.attributes
        if isinstance(attrs, MessageAttributes) and attrs.attach.strip():
            # the files follow the text: a reply that attaches some is sent whole when it closes
            return await whole(await content.final(), ctx)
        room_id = ctx.context.args.room_id
        quoted, sender = reply_to(ctx, room_id)
        first = [quoted, sender]

        async def send_part(text: str) -> str:
            (q, s), first[:] = first, [None, None]
            return (await client.send_text(room_id, text, reply_to=q, mention=s))[0]

        async def edit(event_id: str, text: str) -> None:
            await client.edit_text(room_id, event_id, text)

        async def delete(event_id: str) -> None:
            await client.redact(room_id, event_id)

        result = await LiveMessage(
            send=send_part,
            edit=edit,
            delete=delete,
            limit=MAX_LENGTH,
            length=wire_len,
            interval=settings.live_interval,
            on_part=ctx.part_sent,
            adopt=live_drafts(ctx, "matrix:message"),
        ).deliver(content)
        return {"room_id": room_id, "event_ids": result.message_ids, "edits": result.edits, "reply_to": quoted}

    message = output(
        type="matrix:message",
        context="matrix:room",
        attributes=MessageAttributes,
        description="Send a message to this Matrix room (Markdown), with files if attach names them.",
        instructions=(
            "Replies to the message you are answering. Any length: it is split for you, code blocks "
            'kept whole. attach="media:1" sends a file an action returned.'
        ),
        live=settings.live,
    )(live if settings.live else whole)

    return Extension(
        name="matrix",
        contexts=[room],
        outputs=[message],
        inputs=[
            Input(
                type="matrix:sync",
                subscribe=_subscriber(client, settings, approver),
                description="Messages in the Matrix rooms the bot is in.",
                fetch=client.fetch,
            )
        ],
        services=[Service(name="matrix", start=client.start, stop=client.stop)],
        description="Matrix bot: direct rooms, mentions and watched rooms.",
        approver=approver,
    )


def _subscriber(
    client: MatrixClient, settings: MatrixSettings, approver: MatrixApprover | None = None
) -> Callable[[Callable[..., Awaitable[Any]], Hub], Awaitable[Callable[[], Awaitable[None]]]]:
    """The input's subscribe: an intake for the hub, fed by the sync loop on the one worker
    holding the lease ``matrix:sync:<user id>``."""

    async def subscribe(send_input: Callable[..., Awaitable[Any]], hub: Hub) -> Callable[[], Awaitable[None]]:
        intake = Intake(client, settings, hub, send_input, approver=approver)
        syncer = Syncer(client, settings, intake)
        keeper = hub.lease(f"matrix:sync:{settings.user_id}", ttl=settings.lease_ttl)
        task = hub.create_task(keeper.hold(syncer.run), name="matrix:sync")

        async def stop() -> None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await intake.stop()

        return stop

    return subscribe

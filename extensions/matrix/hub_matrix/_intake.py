"""Room events and invites into the hub, as the sync loop hands them over: which events to
answer (``_events``), who may talk to the bot (``allowed_users``, ``allowed_rooms``,
``dm_policy``), the loop guard, whether it is one of the hub's commands, then the message
recorded in the hub's inbox (``platform_id = "matrix:<event id>"``: a redelivery is not
answered twice); and the typing indicator while its run goes on.

Who sent an event is weighed before anything is answered, the encryption notice included: a
sender who is not let in is told nothing. An encrypted room is told once, in the room and in
the log, that the bot cannot read it. A
room whose state holds ``m.room.encryption`` is encrypted whatever a message in it says: a
message sent there in clear is refused the same way, never answered in clear.

An event that fails to be taken for a reason of its own (a bug in reading it, a shape the
intake does not expect) raises, so that the sync loop keeps its token and syncs the batch
again; at its `PARK_AFTER`-th failure it is parked in the inbox (``hub inbox``) and the
sync goes on past it. A store failure is never counted: the batch is synced until the store
takes it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from hub.platform import (
    AllowList,
    PoisonUpdates,
    SendFailed,
    TypingIndicator,
    admit_private,
    parse_command,
    private_access,
    send_pairing_code,
)

from ._approvals import MatrixApprover, answer_event
from ._client import MatrixClient
from ._events import Encrypted, Ignored, Inbound, classify
from ._settings import MatrixSettings

if TYPE_CHECKING:
    from hub import Decision, Hub

__all__ = ["Intake", "ENCRYPTED_NOTICE", "REFUSED_KEY", "PARK_AFTER"]

log = logging.getLogger("hub_matrix")

ENCRYPTED_NOTICE = (
    "This room is end-to-end encrypted, and this bot cannot read encrypted messages. "
    "Talk to it in a room without encryption (encryption cannot be turned off in a room: "
    "start a new one, or a direct chat with encryption off)."
)
REFUSED_KEY = "matrix:encrypted-told:"
"""Memory key prefix of the rooms told already that their encryption is not supported."""
PARK_AFTER = 3
"""Failures (not the store's) after which an event is parked instead of synced again."""


class Intake:
    """Takes each room event and invite into the hub as `take()` and `invited()` decide."""

    def __init__(
        self,
        client: MatrixClient,
        settings: MatrixSettings,
        hub: Hub,
        send: Callable[..., Awaitable[Any]],
        *,
        approver: MatrixApprover | None = None,
    ) -> None:
        self.client = client
        self.approver = approver
        self.settings = settings
        self.hub = hub
        self.send = send
        self.rooms = AllowList(settings.allowed_rooms)
        self.users = AllowList(settings.allowed_users)
        self.bots = frozenset(settings.bots)
        self.guard = settings.loop_guard()
        self._told: set[str] = set()
        self._joined: set[str] = set()  # joined since nio last synced its rooms (max_rooms)
        # a homeserver shows "typing" for the timeout given; renewed every 20 s while a run goes on
        self.typing = TypingIndicator("matrix", client.typing, create_task=hub.create_task, interval=20.0)
        self.poison = PoisonUpdates("matrix", hub.inbox, park_after=PARK_AFTER, redactor=hub.redactor)

    def is_direct(self, room_id: str) -> bool:
        """A room of the bot and one other member (a direct chat)."""
        room = self.client.nio.rooms.get(room_id)
        return room is not None and 0 < room.member_count <= 2

    def is_encrypted(self, room_id: str) -> bool:
        """The room's state turns encryption on (``m.room.encryption``, which nio keeps)."""
        room = self.client.nio.rooms.get(room_id)
        return room is not None and bool(room.encrypted)

    def display_name(self) -> str:
        for room in self.client.nio.rooms.values():
            user = room.users.get(self.client.user_id)
            if user is not None and user.display_name:
                return str(user.display_name)
        return ""

    async def take_or_park(self, room_id: str, event: Any) -> None:
        """`take()`, or park ``event`` once it has failed `PARK_AFTER` times;
        returns when the sync may go past it. Raises (its batch is synced again) while it
        has failed fewer times, or whenever the store failed."""
        key = event_key(room_id, event)
        try:
            await self.take(room_id, event)
        except Exception as e:
            content, meta = _what_it_was(room_id, event)
            context = f"matrix:room:{room_id}"
            if not await self.poison.failed(key, e, context=context, type="matrix:room", content=content, meta=meta):
                raise
        else:
            self.poison.succeeded(key)

    async def take(self, room_id: str, event: Any) -> None:
        """Take one timeline event: recorded in the inbox, refused, or ignored (logged why); a
        reaction or reply that answers an approval is answered through the hub instead."""
        if self.approver is not None and await answer_event(room_id, event, self.hub, self.approver):
            return
        verdict = classify(
            room_id,
            event,
            me=self.client.user_id,
            settings=self.settings,
            direct=self.is_direct(room_id),
            display_name=self.display_name(),
        )
        if isinstance(verdict, Ignored):
            log.debug("matrix: event %s in %s ignored: %s", verdict.event_id, room_id, verdict.reason)
            return
        if not self.rooms.allows(room_id):
            log.info("matrix: room %s is not on allowed_rooms: ignored", room_id)
            return
        if verdict.direct and self.settings.dm_policy != "open":
            if not await self._private_allows(verdict):
                return
        elif not self.users.allows(verdict.sender):
            log.info("matrix: room %s: user %s is not on allowed_users: ignored", room_id, verdict.sender)
            return
        if isinstance(verdict, Encrypted) or self.is_encrypted(room_id):
            await self._refuse_encrypted(room_id, verdict.sender)
            return
        if self.guard is not None and not self.guard.allow(room_id, from_bot=verdict.sender in self.bots):
            log.info(
                "matrix: room %s: loop guard: not answering bot %s (%d answers to bots in %.0fs)",
                room_id,
                verdict.sender,
                self.settings.loop_guard_turns,
                self.settings.loop_guard_window,
            )
            return
        sub = await self.send(
            "matrix:room",
            {"room_id": room_id},
            verdict.text,
            user=verdict.sender,
            platform_id=verdict.platform_id,
            meta=verdict.meta(),
            media=list(verdict.media),
            command=parse_command(
                verdict.text, self.hub.commands.names(), bot_name=self.settings.localpart(), group=not verdict.direct
            ),
        )
        if sub.duplicate:
            log.info("matrix: event %s was recorded before: not answered again", verdict.event_id)
            return
        if self.settings.typing:
            self.typing.watch(room_id, sub.result)

    async def invited(self, room_id: str, inviter: str | None, direct: bool) -> None:
        """An invite to ``room_id`` by ``inviter``: joined, declined, or left (logged why).

        The inviter is weighed before the bot joins, as a message of theirs would be; under
        ``dm_policy = "pairing"`` a stranger's direct invite draws their pairing code, and is
        joined only to tell it (once). Past ``max_rooms`` every invite is declined."""
        if not self.settings.autojoin:
            log.info("matrix: invited to %s by %s; autojoin = false: left pending", room_id, inviter)
            return
        reason, code = await self._invite_refusal(room_id, inviter, direct)
        if reason is not None:
            log.info("matrix: invite to %s declined: %s", room_id, reason)
            await self.client.decline(room_id)
            return
        self._joined.add(room_id)
        try:
            await self.client.join(room_id)
        except SendFailed as e:
            self._joined.discard(room_id)
            log.warning("matrix: joining %s (invited by %s) failed: %s", room_id, inviter, e.reason)
            if code is not None and code.code is not None and inviter is not None:
                await self.hub.access.retract("matrix", inviter, code.code)  # the next invite draws one
            return
        log.info("matrix: joined %s, invited by %s", room_id, inviter)
        if code is not None and inviter is not None:
            send_pairing_code(
                self.hub.access,
                self.hub.create_task,
                "matrix",
                inviter,
                code,
                lambda text: self.client.send_text(room_id, text),
            )

    async def _invite_refusal(
        self, room_id: str, inviter: str | None, direct: bool
    ) -> tuple[str | None, Decision | None]:
        """Why an invite is declined (None: join it), and the pairing decision whose code to
        tell a stranger in the room once joined."""
        if not self.rooms.allows(room_id):
            return "the room is not on allowed_rooms", None
        if inviter is None:
            return "the invite names no inviter", None
        self._joined -= self.client.nio.rooms.keys()  # synced since: nio counts them
        rooms = set(self.client.nio.rooms) | self._joined
        if room_id not in rooms and len(rooms) >= self.settings.max_rooms:
            return f"the bot is in max_rooms = {self.settings.max_rooms} rooms already", None
        if self.users.allows(inviter):
            return None, None
        if not (direct and self.settings.dm_policy == "pairing"):
            return f"{inviter} is not on allowed_users", None
        decision = await private_access(self.hub.access, "matrix", self.settings, inviter)
        if decision.allowed:
            return None, None
        if decision.message is None:
            return f"{inviter} is not paired and was told their code already", None
        return None, decision

    async def _refuse_encrypted(self, room_id: str, sender: str) -> None:
        """Say once (per room, across restarts) that encrypted messages cannot be read."""
        if room_id in self._told:
            return
        self._told.add(room_id)
        key = REFUSED_KEY + room_id
        if await self.hub.memory.get(key):
            return
        log.warning(
            "matrix: room %s is end-to-end encrypted (a message from %s): encrypted rooms are not "
            "supported; telling the room once",
            room_id,
            sender,
        )
        try:
            await self.client.send_text(room_id, ENCRYPTED_NOTICE)
        except SendFailed as e:
            self._told.discard(room_id)
            log.warning("matrix: could not tell %s that it is not supported: %s", room_id, e.reason)
            return
        await self.hub.memory.set(key, True)

    async def _private_allows(self, verdict: Inbound | Encrypted) -> bool:
        """``dm_policy`` in a direct room; an unknown user under ``"pairing"`` is sent the code,
        once, in the background (the sync goes on meanwhile)."""
        room_id = verdict.room_id
        return await admit_private(
            self.hub.access,
            self.hub.create_task,
            "matrix",
            self.settings,
            verdict.sender,
            send=lambda text: self.client.send_text(room_id, text),  # through the governor: paced, retried
        )

    async def stop(self) -> None:
        await self.typing.stop()


def event_key(room_id: str, event: Any) -> str:
    """The id a failing event is known by: its inbox id (``matrix:<event id>``: a parked
    event synced again is then passed over), else its JSON's, in its room."""
    event_id = event.get("event_id") if isinstance(event, dict) else None
    if isinstance(event_id, str) and event_id:
        return f"matrix:{event_id}"
    raw = json.dumps(event, default=repr, sort_keys=True).encode()
    return f"matrix:{room_id}:{hashlib.sha256(raw).hexdigest()[:32]}"


def _what_it_was(room_id: str, event: Any) -> tuple[Any, dict[str, Any]]:
    """A poison event as a parked input: its body when it can be read, else the event's
    JSON; what ``hub inbox retry`` needs to reply to it."""
    raw = json.dumps(event, default=repr, sort_keys=True)
    meta: dict[str, Any] = {"room_id": room_id, "event": raw}
    if not isinstance(event, dict):
        return raw, meta
    for key in ("event_id", "sender"):
        if isinstance(event.get(key), str):
            meta[key] = event[key]
    content = event.get("content")
    body = content.get("body") if isinstance(content, dict) else None
    return (body if isinstance(body, str) and body.strip() else raw), meta

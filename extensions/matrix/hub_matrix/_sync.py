"""The sync loop: long-polling ``/sync``, each event handed to the intake, then the batch's
``next_batch`` token kept in the hub's memory (``matrix:next_batch:<user id>``), so that a
restart resumes exactly after the last batch taken. A batch cut off by a crash is synced
again from the token before it: the inbox refuses what it recorded already (its platform id
is known), so nothing is lost and nothing answered twice.

The first start (no token kept) takes the rooms and invites as they are and answers no
message sent before it: a bot added to an account with years of history does not answer them.

An event that makes the intake fail (a bug, an event of a shape it does not expect) keeps
the token where it is: the batch is synced again (the inbox refuses what it took already),
and at the event's `PARK_AFTER`-th failure it is parked in the inbox and the
sync goes past it, so one event never wedges the sync and none is lost. A store error is
never counted against an event: the batch is synced again until the store takes it.
An invite that fails to be taken is logged and passed over (it is not an input to park).

With several workers only the holder of the lease ``matrix:sync:<user id>`` syncs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nio import SyncResponse

from hub import ExtensionError, HubError
from hub.platform import Backoff, RateLimited, TransientSendError

from ._client import MatrixClient, map_error
from ._intake import Intake
from ._settings import MatrixSettings

__all__ = ["Syncer", "TOKEN_KEY"]

log = logging.getLogger("hub_matrix")

TOKEN_KEY = "matrix:next_batch:"
"""The memory key prefix of the kept sync token; the bot's user id follows."""


class EventNotTaken(Exception):
    """An event failed to be taken and is not parked yet: its batch is synced again."""


class Syncer:
    """Calls ``/sync`` until cancelled, handing each event to ``intake``."""

    def __init__(self, client: MatrixClient, settings: MatrixSettings, intake: Intake) -> None:
        self.client = client
        self.settings = settings
        self.intake = intake
        self.hub = intake.hub
        self.token: str | None = None
        self.key = TOKEN_KEY + settings.user_id

    async def run(self) -> None:
        """Sync until cancelled. After an error, wait a bounded, growing delay (logged)."""
        stored = await self.hub.memory.get(self.key)
        self.token = str(stored) if stored else None
        backoff = Backoff(first=1.0, most=60.0, jitter=0.2)
        try:
            while True:
                try:
                    await self._once()
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    self.hub.metrics.platform_connected("matrix", False)
                    await asyncio.sleep(self._after(e, backoff))
                else:
                    backoff.reset()
        finally:  # stopped, or the lease went to another worker
            self.hub.metrics.platform_connected("matrix", False)

    def _after(self, e: Exception, backoff: Backoff) -> float:
        """How long to wait after a failed sync; says why in the log."""
        match e:
            case EventNotTaken():
                delay = backoff.next()
                log.warning("matrix: %s; its batch is synced again in %.1fs", e, delay)
                return delay
            case RateLimited():
                log.warning("matrix: /sync rate limited; retrying in %.1fs", e.retry_after)
                return e.retry_after
            case ExtensionError() | HubError():
                delay = backoff.next()
                log.error("matrix: %s; retrying in %.0fs", e, delay)
                return delay
            case TransientSendError() | OSError() | TimeoutError():
                delay = backoff.next()
                log.warning("matrix: /sync failed (%s); retrying in %.1fs", e, delay)
                return delay
            case _:
                delay = backoff.next()
                log.error("matrix: /sync failed (%s: %s); retrying in %.1fs", type(e).__name__, e, delay, exc_info=e)
                return delay

    async def _once(self) -> None:
        await self.client.ensure_ready()
        nio = self.client.nio
        self.hub.metrics.platform_connected("matrix", True)
        timeout = int(self.settings.sync_timeout * 1000) if self.token else 0
        resp = await nio.sync(timeout=timeout, since=self.token)
        if not isinstance(resp, SyncResponse):
            raise map_error(resp)
        first = self.token is None
        for room_id, invite in resp.rooms.invite.items():
            inviter, direct = _invite_of(invite.invite_state, self.client.user_id)
            await self._guarded(f"the invite to {room_id}", self.intake.invited(room_id, inviter, direct))
        skipped = 0
        for room_id, joined in resp.rooms.join.items():
            for event in joined.timeline.events:
                source = getattr(event, "source", None)
                if first:
                    skipped += 1
                    continue
                try:
                    await self.intake.take_or_park(room_id, source)
                except (asyncio.CancelledError, HubError):
                    raise  # a store error: never the event's fault, the batch is synced again
                except Exception as e:
                    event_id = source.get("event_id", "?") if isinstance(source, dict) else "?"
                    raise EventNotTaken(f"event {event_id} in {room_id} was not taken ({type(e).__name__}: {e})") from e
        if skipped:
            log.info("matrix: first sync: %d earlier events in %d rooms left unanswered", skipped, len(resp.rooms.join))
        self.token = resp.next_batch
        await self.hub.memory.set(self.key, self.token)

    async def _guarded(self, what: str, step: Any) -> None:
        try:
            await step
        except (asyncio.CancelledError, HubError):
            raise  # a store error: the batch is synced again, the inbox refuses what it has
        except Exception as e:
            log.error("matrix: %s could not be taken (%s: %s): skipped", what, type(e).__name__, e, exc_info=e)


def _invite_of(state: list[Any], me: str) -> tuple[str | None, bool]:
    """Who invited the bot, and whether as a direct chat (``is_direct``)."""
    for event in state:
        source = getattr(event, "source", None)
        if not isinstance(source, dict) or source.get("type") != "m.room.member" or source.get("state_key") != me:
            continue
        # nio keeps an invite event's content on the event, not in its source
        parsed = getattr(event, "content", None)
        content = parsed if isinstance(parsed, dict) else source.get("content")
        content = content if isinstance(content, dict) else {}
        sender = source.get("sender")
        return (sender if isinstance(sender, str) else None), bool(content.get("is_direct"))
    return None, False

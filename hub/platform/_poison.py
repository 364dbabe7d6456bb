"""Platform updates that cannot be taken: a poison update is parked, and intake goes on.

An extension takes each update from its platform into the hub's inbox before it confirms
it (Telegram's offset, a webhook's answer). An update that fails every time (a bug in
reading it, a shape the library does not expect) would then stop intake for the whole
bot, retried forever. [`PoisonUpdates`][hub.platform.PoisonUpdates] counts the failures of each update and, at
``park_after``, parks it in the inbox (``hub inbox`` lists it, ``retry`` answers it,
``drop`` gives it up) so the extension moves past it: as the inbox parks a poison input.

Failures of the store or of the hub ([`StoreError`][hub.StoreError], a hub that is stopping)
are not the update's fault: they are never counted, and the update is retried as often
as it takes, so a database outage parks nothing.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

from ..errors import RunError, StoreError
from ..logs import InputLog
from ..redact import Redactor
from ..store import InboxStore

__all__ = ["PoisonUpdates", "is_transient"]

log = logging.getLogger("hub.platform")

#: Updates whose failures are remembered at once; the oldest are forgotten past it (an
#: update that failed and never came back).
_REMEMBERED = 1000


def is_transient(e: BaseException) -> bool:
    """Whether taking an update failed because of the store or the hub, not the update."""
    return isinstance(e, StoreError | RunError)


class PoisonUpdates:
    """One platform's update failures, by the id that recognises the update.

    Args:
        platform: The platform's name, for the log ("telegram").
        inbox: Where a poison update is parked (``hub.inbox``).
        park_after: Failures after which an update is parked (at least 1).
        redactor: Masks secrets in what is parked, as the intake masks what it records
            (``hub.redactor``): a poison update is stored and shown by ``hub inbox`` too.

    Attributes:
        platform: The platform's name.
        inbox: Where a poison update is parked.
        park_after: Failures after which an update is parked.
        redactor: Masks secrets in what is parked.
    """

    def __init__(
        self, platform: str, inbox: InboxStore, *, park_after: int = 3, redactor: Redactor | None = None
    ) -> None:
        if park_after < 1:
            raise ValueError(f"park_after must be at least 1, not {park_after}")
        self.platform = platform
        self.inbox = inbox
        self.park_after = park_after
        self.redactor = redactor
        self._failures: OrderedDict[str, int] = OrderedDict()

    def succeeded(self, platform_id: str) -> None:
        """The update was taken: its failures are forgotten."""
        self._failures.pop(platform_id, None)

    async def failed(
        self,
        platform_id: str,
        error: Exception,
        *,
        context: str,
        type: str,
        content: Any,
        meta: dict[str, Any] | None = None,
        last: bool = False,
    ) -> bool:
        """Count a failure to take the update ``platform_id``. True when it is parked now
        (the caller moves past it, as if taken); False when it is to be tried again.

        ``last``: the platform says it will not deliver the update again (Slack's last
        retry): parked at this failure whatever the count, as it would be lost otherwise
        (with several workers, each counts only the deliveries it got).

        ``context``, ``type`` and ``content`` make the parked input (what ``hub inbox
        retry`` runs): the conversation it belongs to as far as the extension can tell, and
        what it said (the raw update when nothing better can be read from it).

        Raises:
            StoreError: the inbox cannot park it now (the update is tried again).
        """
        if is_transient(error):
            return False
        if await self.inbox.seen(platform_id):  # parked (or recorded) before: a redelivery
            self._failures.pop(platform_id, None)
            log.info("%s: update %s failed again but the inbox has it: moving past it", self.platform, platform_id)
            return True
        count = self._failures.pop(platform_id, 0) + 1
        self._failures[platform_id] = count
        while len(self._failures) > _REMEMBERED:
            self._failures.popitem(last=False)
        reason = f"{type_name(error)}: {error}"
        if count < self.park_after and not last:
            log.warning(
                "%s: update %s could not be taken (%s); attempt %d of %d before it is parked",
                self.platform,
                platform_id,
                reason,
                count,
                self.park_after,
                exc_info=error,
            )
            return False
        r = self.redactor
        if r is not None:
            content, meta, reason = r.redact_tree(content), r.redact_tree(meta or {}), r.redact(reason)
        entry = InputLog(type=type, content=content, platform_id=platform_id, meta=dict(meta or {}))
        parked = await self.inbox.park(context, entry, f"not taken: {reason}", failures=count)
        self._failures.pop(platform_id, None)
        if parked:  # else recorded by another worker meanwhile: the inbox has it
            log.error(
                "%s: update %s failed %d times (%s): parked, intake goes on; `hub inbox` lists it as %s",
                self.platform,
                platform_id,
                count,
                reason,
                entry.id[:10],
            )
        return True


def type_name(e: BaseException) -> str:
    return type(e).__name__

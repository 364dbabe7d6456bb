"""The typing indicator every platform shows while a run for a chat goes on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["TypingIndicator"]

log = logging.getLogger("hub.platform")


class TypingIndicator:
    """Keeps a platform's "typing..." on in a chat while any run for it is in progress.

    ``show(chat)`` is one request that shows the indicator; it is repeated every
    ``interval`` seconds (platforms clear it after a few seconds) until every future
    watched for the chat is done. One task per chat, made with ``create_task`` (pass
    [`Hub.create_task()`][hub.Hub.create_task]); an error from ``show`` ends that chat's
    indicator (logged), never the run.

    Attributes:
        platform: The platform's name, for the log.
        show: ``await show(chat)``: one request that shows the indicator.
        create_task: How its tasks are made ([`Hub.create_task`][hub.Hub.create_task]).
        interval: Seconds between two requests for a chat.
    """

    def __init__(
        self,
        platform: str,
        show: Callable[[Any], Awaitable[Any]],
        *,
        create_task: Callable[..., asyncio.Task[Any]],
        interval: float = 4.5,
    ) -> None:
        self.platform = platform
        self.show = show
        self.create_task = create_task
        self.interval = interval
        self._pending: dict[Any, set[asyncio.Future[Any]]] = {}
        self._tasks: dict[Any, asyncio.Task[Any]] = {}

    def watch(self, chat: Any, until: asyncio.Future[Any]) -> None:
        """Show typing in ``chat`` until ``until`` (and every other future watched there) is done."""
        self._pending.setdefault(chat, set()).add(until)
        if chat not in self._tasks:
            self._tasks[chat] = self.create_task(self._keep(chat), name=f"{self.platform}:typing:{chat}")

    @property
    def chats(self) -> list[Any]:
        """Chats that show typing now."""
        return list(self._tasks)

    async def _keep(self, chat: Any) -> None:
        try:
            while True:
                waiting = {f for f in self._pending.get(chat, ()) if not f.done()}
                if not waiting:
                    return
                self._pending[chat] = waiting
                try:
                    await self.show(chat)
                except Exception as e:  # best effort: no permission, a dropped connection
                    log.info("%s: no typing indicator in %s: %s", self.platform, chat, e)
                    return
                await asyncio.wait(waiting, timeout=self.interval)
        finally:
            self._tasks.pop(chat, None)
            self._pending.pop(chat, None)

    async def stop(self) -> None:
        """Cancel every chat's indicator (a task cancelled before it ran has no finally to clean up)."""
        tasks = list(self._tasks.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._pending.clear()

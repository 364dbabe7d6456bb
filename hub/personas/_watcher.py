"""The persona watcher: re-reads edited persona files while the hub runs.

A component of the hub (started with it, stopped with it). Together with the revision
store that the composition root hands to the persona set (``on_change``), every edit is
validated, logged and recorded as a revision when it is saved, not only when a message
needs the persona.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..tasks import cancel_and_wait
from ._persona import PersonaSet

__all__ = ["PersonaWatcher"]

log = logging.getLogger("hub.personas")


class PersonaWatcher:
    """Re-reads edited persona files every ``interval`` seconds, so an edit is validated,
    logged and recorded as a revision when it is saved, not only when a message needs it."""

    def __init__(self, personas: PersonaSet, *, interval: float | None = None, skills: Any = None) -> None:
        self.personas = personas
        self.skills = skills  # a SkillSet: skills are versioned like personas, watched with them
        self.interval = interval or personas.interval or 1.0
        self._task: asyncio.Task[None] | None = None

    async def start(self, hub: Any = None) -> None:
        if self.skills is not None:  # the skills are there for the first message (read off the loop)
            await self.skills.refresh_async()
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name="persona-watcher")

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.personas.refresh()
                if self.skills is not None:
                    await self.skills.refresh_async()
            except Exception:  # a watcher that dies would silently freeze personas
                log.exception("persona watcher: refresh failed")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

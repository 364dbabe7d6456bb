"""The operator features of a hub, wired into its extension points in one place.

:class:`Operations` owns: the secrets redactor (and the redacting run store and prompt
builder it puts in front of the hub's), the persona revision store (fed by the persona
set's ``on_change``), the role guard, the daily budgets with the limit reply, and the
persona watcher that picks up edits even while no message arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .guard import RoleGuard
from .limits import Budgets, InMemoryUsageStore, SQLiteUsageStore, UsageStore
from .persona import PersonaSet
from .redact import RedactingPromptBuilder, RedactingRunStore, Redactor
from .revisions import InMemoryRevisionStore, RevisionStore, SQLiteRevisionStore

if TYPE_CHECKING:
    from .db import Database
    from .hub import Hub

__all__ = ["Operations", "PersonaWatcher", "Heartbeat"]

log = logging.getLogger(__name__)


class Operations:
    """Installs itself on ``hub`` when created; ``stores`` are opened and closed by the hub."""

    def __init__(self, hub: Hub, db: Database | None) -> None:
        self.redactor = Redactor.from_config(hub.config)
        if self.redactor:
            hub.runs = RedactingRunStore(hub.runs, self.redactor)
            hub.prompts = RedactingPromptBuilder(self.redactor, budget=hub.config.agent.prompt_budget)
        self.revisions: RevisionStore = SQLiteRevisionStore(db) if db is not None else InMemoryRevisionStore()
        self.usage: UsageStore = SQLiteUsageStore(db) if db is not None else InMemoryUsageStore()
        if hub.personas.on_change is None:
            hub.personas.on_change = self._record_persona
        self.guard = RoleGuard(hub.config.roles)
        hub.guards.append(self.guard)
        self.budgets = Budgets(hub, self.usage)
        self.budgets.install()
        hub.components.append(PersonaWatcher(hub.personas))

    @property
    def stores(self) -> tuple[Any, ...]:
        return (self.revisions, self.usage)

    def _record_persona(self, name: str, persona: Any, text: str) -> None:
        self.revisions.record(name, text)


class PersonaWatcher:
    """Re-reads edited persona files every ``interval`` seconds, so an edit is validated,
    logged and recorded as a revision when it is saved, not only when a message needs it."""

    def __init__(self, personas: PersonaSet, *, interval: float | None = None) -> None:
        self.personas = personas
        self.interval = interval or personas.interval or 1.0
        self._task: asyncio.Task[None] | None = None

    async def start(self, hub: Hub) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name="persona-watcher")

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.personas.refresh()
            except Exception:  # a watcher that dies would silently freeze personas
                log.exception("persona watcher: refresh failed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class Heartbeat:
    """Touches a file every ``interval`` seconds from the event loop, so ``hub health`` (the
    container's healthcheck) can tell a live hub from a stuck or dead one without HTTP."""

    def __init__(self, path: Path, *, interval: float = 10.0) -> None:
        self.path = Path(path)
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    async def start(self, hub: Hub) -> None:
        if self._task is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._task = asyncio.create_task(self._beat(hub), name="heartbeat")

    async def _beat(self, hub: Hub) -> None:
        from .storehealth import store_health

        while True:
            try:
                degraded = store_health(hub) if hub is not None else None  # a second line for `hub health`
                # written aside then renamed: `hub health` never reads a half-written file
                tmp = self.path.with_name(self.path.name + ".tmp")
                tmp.write_text(f"{time.time():.0f}\n" + (f"degraded: {degraded}\n" if degraded else ""), encoding="utf-8")
                os.replace(tmp, self.path)
            except OSError as e:
                log.warning("heartbeat: cannot write %s: %s", self.path, e)
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.path.unlink(missing_ok=True)  # a stopped hub is not healthy
        self.path.with_name(self.path.name + ".tmp").unlink(missing_ok=True)

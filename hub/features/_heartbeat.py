"""The heartbeat file that ``hub health`` (the container's healthcheck) reads.

A component of the hub that ``hub run`` asks for (``Hub(config, heartbeat=PATH)``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..tasks import cancel_and_wait

__all__ = ["Heartbeat"]

log = logging.getLogger("hub.features")


class Heartbeat:
    """Touches a file every ``interval`` seconds from the event loop, so ``hub health`` (the
    container's healthcheck) can tell a live hub from a stuck or dead one without HTTP."""

    def __init__(
        self,
        path: Path,
        *,
        interval: float = 10.0,
        health: Callable[[], str | None] | None = None,
        notes: Callable[[], str | None] | None = None,
        models: Callable[[], dict[str, str]] | None = None,
    ) -> None:
        self.path = Path(path)
        self.interval = interval
        self.health = health  # why the stores are degraded, if they are: a second line
        self.notes = notes  # what is not whole but not a failure (episodes parked): a "note:" line
        self.models = models  # named models not answering now: a "model NAME: why" line each
        self._task: asyncio.Task[None] | None = None

    async def start(self, hub: Any = None) -> None:
        if self._task is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._task = asyncio.create_task(self._beat(), name="heartbeat")

    async def _beat(self) -> None:
        while True:
            try:
                degraded = self.health() if self.health is not None else None
                note = self.notes() if self.notes is not None else None
                models = self.models() if self.models is not None else {}
                # written aside then renamed: `hub health` never reads a half-written file
                tmp = self.path.with_name(self.path.name + ".tmp")
                tmp.write_text(
                    f"{time.time():.0f}\n"
                    + (f"degraded: {degraded}\n" if degraded else "")
                    + (f"note: {note}\n" if note else "")
                    + "".join(f"model {name}: {why}\n" for name, why in models.items()),
                    encoding="utf-8",
                )
                os.replace(tmp, self.path)
            except OSError as e:
                log.warning("heartbeat: cannot write %s: %s", self.path, e)
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        self.path.unlink(missing_ok=True)  # a stopped hub is not healthy
        self.path.with_name(self.path.name + ".tmp").unlink(missing_ok=True)

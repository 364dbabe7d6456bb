"""The running training export: each new episode appended to a JSONL file as the hub runs.

``[memory] export_training = true`` turns it on. After every run, the run's episode (see
`hub.memory.episode_from_run()`) becomes one ``{"prompt", "completion"}`` line, the
line ``hub export-training`` writes for it, with the same rule (completed runs that
answered) and secrets masked by the hub's redactor. The file is ``training_path`` under
``data_dir``; when it would pass ``training_max_bytes`` it is rotated (``.1``, ``.2``, ...,
``training_backups`` kept) by the standard library's `RotatingFileHandler`.

Lines are written in a thread, one at a time and in the order runs end; a failed write is
logged, never a reason to fail a run (the episode store keeps the episode for a later
``hub export-training``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine import Plugin
from ._episode_store import Episode, episode_from_run

if TYPE_CHECKING:
    from ..config import HubConfig
    from ..definitions import RunContext, RunResult
    from ..redact import Redactor

__all__ = ["TrainingExport", "training_line"]

log = logging.getLogger("hub.memory")


def training_line(ep: Episode, *, all_states: bool = False) -> dict[str, Any] | None:
    """The line ``hub export-training`` writes for ``ep``; None for an episode it skips."""
    if not ep.prompt or not ep.completion or (ep.state != "completed" and not all_states):
        return None
    return {"prompt": ep.prompt, "completion": ep.completion}


class TrainingExport(Plugin):
    """The plugin (and component) that appends each finished run's training line to the file."""

    name = "training_export"

    def __init__(self, config: HubConfig, redactor: Redactor) -> None:
        cfg = config.memory
        self.redactor = redactor
        path = Path(cfg.training_path)
        self.path = path if path.is_absolute() else config.data_dir / path
        self.max_bytes = cfg.training_max_bytes
        self.backups = cfg.training_backups
        self._handler: RotatingFileHandler | None = None
        self._chain: asyncio.Task[None] | None = None
        self.written = 0

    async def start(self, hub: Any = None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handler = RotatingFileHandler(
            self.path, maxBytes=self.max_bytes, backupCount=self.backups, encoding="utf-8", delay=True
        )
        handler.setFormatter(logging.Formatter("%(message)s"))
        self._handler = handler

    async def stop(self) -> None:
        """Finish the lines still being written, then close the file. Idempotent."""
        if self._chain is not None:
            await asyncio.gather(self._chain, return_exceptions=True)
        if self._handler is not None:
            handler, self._handler = self._handler, None
            handler.close()

    async def after_run(self, result: RunResult, ctx: RunContext | None) -> None:
        """Queue the run's line (if it has one) after the lines of earlier runs."""
        if self._handler is None:
            return
        episode = episode_from_run(result, user=ctx.user if ctx is not None else None)
        line = training_line(episode) if episode is not None else None
        if line is None:
            return
        if self.redactor:
            line = self.redactor.redact_tree(line)
        text = json.dumps(line, ensure_ascii=False)
        previous = self._chain
        self._chain = asyncio.create_task(self._write(text, previous), name="training:write")

    async def flush(self) -> None:
        """Wait until every line queued so far is in the file."""
        if self._chain is not None:
            await asyncio.gather(self._chain, return_exceptions=True)

    async def _write(self, text: str, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        handler = self._handler
        if handler is None:
            return
        record = logging.LogRecord("hub.training", logging.INFO, "", 0, text, None, None)
        try:
            await asyncio.to_thread(self._emit, handler, record)
        except Exception as e:
            log.error("training export: could not append to %s: %s: %s", self.path, type(e).__name__, e)
            return
        self.written += 1

    @staticmethod
    def _emit(handler: RotatingFileHandler, record: logging.LogRecord) -> None:
        # emit() would swallow an error into handleError; the export reports its own
        handler.acquire()
        try:
            if handler.shouldRollover(record):
                handler.doRollover()
            if handler.stream is None:
                handler.stream = handler._open()
            handler.stream.write(handler.format(record) + "\n")
            handler.flush()
        finally:
            handler.release()

"""A run store that keeps secrets out of what it records: event logs, reasons, who and what."""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Awaitable
from typing import Any

from ..logs import Log
from ..redact import Redactor
from ._run_records import RunRecord, RunStore, RunTotals

__all__ = ["RedactingRunStore"]

_TEXTS = ("reason", "user_name", "user_handle", "message", "reply")
"""The texts of a run's row that may carry what a user or a model wrote."""


class RedactingRunStore(RunStore):
    """A run store that keeps secrets out of what it records (event logs and reasons).

    Entries are redacted copies: the engine's own objects (which may feed later calls)
    are left as they are.
    """

    def __init__(self, inner: RunStore, redactor: Redactor) -> None:
        self.inner = inner
        self.redactor = redactor

    def __getattr__(self, name: str) -> Any:  # the inner store's extras (its db, ...)
        return getattr(self.inner, name)

    def _record(self, run: RunRecord) -> RunRecord:
        """``run`` with its texts (reason, who and what) redacted: a copy when one changes."""
        if not self.redactor:
            return run
        changes: dict[str, Any] = {}
        for name in _TEXTS:
            value = getattr(run, name)
            if value:
                clean = self.redactor.redact(value)
                if clean != value:
                    changes[name] = clean
        return dataclasses.replace(run, **changes) if changes else run

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def create(self, run: RunRecord) -> None:
        await self.inner.create(self._record(run))

    def create_soon(self, run: RunRecord) -> Awaitable[None]:
        return self.inner.create_soon(self._record(run))

    def append(self, run: RunRecord, entry: Log) -> None:
        self.inner.append(run, self.redactor.redact_log(entry))

    def update(self, run: RunRecord) -> None:
        self.inner.update(self._record(run))

    async def sync(self) -> None:
        await self.inner.sync()

    async def finish(self, run: RunRecord) -> None:
        await self.inner.finish(self._record(run))

    async def get(self, run_id: str) -> RunRecord | None:
        return await self.inner.get(run_id)

    async def list(
        self, *, limit: int = 20, state: str | None = None, context: str | None = None, parent_id: str | None = None
    ) -> list[RunRecord]:
        return await self.inner.list(limit=limit, state=state, context=context, parent_id=parent_id)

    async def page(
        self,
        *,
        limit: int = 50,
        before: tuple[float, str] | None = None,
        state: str | None = None,
        context: str | None = None,
        platform: str | None = None,
    ) -> builtins.list[RunRecord]:
        return await self.inner.page(limit=limit, before=before, state=state, context=context, platform=platform)

    async def search(
        self,
        text: str,
        *,
        limit: int = 50,
        before: tuple[float, str] | None = None,
        state: str | None = None,
        context: str | None = None,
        platform: str | None = None,
    ) -> builtins.list[RunRecord]:
        return await self.inner.search(
            text, limit=limit, before=before, state=state, context=context, platform=platform
        )

    async def conversations(
        self, *, limit: int = 50, platform: str | None = None, text: str | None = None
    ) -> builtins.list[tuple[RunRecord, int]]:
        return await self.inner.conversations(limit=limit, platform=platform, text=text)

    async def totals(self, *, since: float) -> RunTotals:
        return await self.inner.totals(since=since)

    async def histogram(self, *, since: float, width: float, buckets: int) -> builtins.list[RunTotals]:
        return await self.inner.histogram(since=since, width=width, buckets=buckets)

    async def recent_contexts(
        self, *, limit: int = 50, platform: str | None = None
    ) -> builtins.list[tuple[str, float, int]]:
        return await self.inner.recent_contexts(limit=limit, platform=platform)

    async def events(self, run_id: str) -> builtins.list[Log]:
        return await self.inner.events(run_id)

    async def forget_user(self, user: str, *, platform: str) -> tuple[int, int]:
        return await self.inner.forget_user(user, platform=platform)

    async def recover(self) -> builtins.list[RunRecord]:
        return await self.inner.recover()

    async def find(self, prefix: str) -> RunRecord | None:
        return await self.inner.find(prefix)

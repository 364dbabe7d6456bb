"""A run store that keeps secrets out of what it records: event logs and reasons."""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Awaitable
from typing import Any

from ..logs import Log
from ..redact import Redactor
from ._run_records import RunRecord, RunStore

__all__ = ["RedactingRunStore"]


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
        if run.reason and self.redactor:
            clean = self.redactor.redact(run.reason)
            if clean != run.reason:
                return dataclasses.replace(run, reason=clean)
        return run

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def create(self, run: RunRecord) -> None:
        await self.inner.create(run)

    def create_soon(self, run: RunRecord) -> Awaitable[None]:
        return self.inner.create_soon(run)

    def append(self, run: RunRecord, entry: Log) -> None:
        self.inner.append(run, self.redactor.redact_log(entry))

    def update(self, run: RunRecord) -> None:
        self.inner.update(run)

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

    async def recent_contexts(
        self, *, limit: int = 50, platform: str | None = None
    ) -> builtins.list[tuple[str, float, int]]:
        return await self.inner.recent_contexts(limit=limit, platform=platform)

    async def events(self, run_id: str) -> builtins.list[Log]:
        return await self.inner.events(run_id)

    async def recover(self) -> builtins.list[RunRecord]:
        return await self.inner.recover()

    async def find(self, prefix: str) -> RunRecord | None:
        return await self.inner.find(prefix)

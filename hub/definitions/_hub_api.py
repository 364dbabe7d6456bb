"""What a handler may use of the hub, as ``ctx.hub``: `HubAPI`.

The [`Hub`][hub.Hub] satisfies it (mypy checks that where the hub is handed to the
engine); it is declared here, below the hub, so that [`RunContext`][hub.RunContext] can name it
without importing the hub. The engine only passes it on to the handlers' context.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from ..config import HubConfig
from ..logs import MediaPart
from ..store import LeaseKeeper, MemoryStore, RunStore
from ._approver import ApprovalDesk
from ._command_call import CommandCall
from ._run_outcome import RunResult

__all__ = ["HubAPI", "PlatformMetrics", "Queued"]

T = TypeVar("T")


class PlatformMetrics(Protocol):
    """``hub.metrics`` as extensions report their platform calls through it."""

    def platform_send(self, platform: str, ok: bool = True) -> None: ...

    def platform_429(self, platform: str) -> None: ...

    def platform_connected(self, platform: str, connections: int | bool) -> None: ...


class Queued(Protocol):
    """What `HubAPI.submit()` returns (a [`Submission`][hub.Submission])."""

    duplicate: bool
    run_id: asyncio.Future[str]
    result: asyncio.Future[RunResult]

    async def wait(self) -> RunResult: ...


class HubAPI(Protocol):
    """The hub's public surface a handler may use. ``context`` is a context type (with
    ``args``), a ``TYPE:KEY`` instance name, or a [`Context`][hub.Context]."""

    @property
    def config(self) -> HubConfig: ...

    @property
    def memory(self) -> MemoryStore: ...

    @property
    def runs(self) -> RunStore: ...

    @property
    def metrics(self) -> PlatformMetrics: ...

    @property
    def approvals(self) -> ApprovalDesk: ...

    async def send(self, context: Any, args: Any = None, data: Any = None, **kw: Any) -> RunResult | None: ...

    async def submit(
        self,
        context: Any,
        args: Any = None,
        data: Any = None,
        *,
        type: str = "text",  # noqa: A002
        user: str | None = None,
        platform_id: str | None = None,
        meta: dict[str, Any] | None = None,
        parent_id: str | None = None,
        formatted: str | None = None,
        media: Sequence[MediaPart] = (),
        command: CommandCall | None = None,
    ) -> Queued: ...

    async def received(self, platform_id: str) -> bool: ...

    def create_task(self, coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]: ...

    def lease(self, name: str, *, ttl: float = 30.0, retry: float | None = None) -> LeaseKeeper: ...

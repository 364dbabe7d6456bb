"""The hub's memory store on each backend a test runs on, for an extension's own state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from ..store import InMemoryInbox, InMemoryRunStore, InMemoryStore, MemoryStore, open_stores
from .config import temp_config

__all__ = ["memory_store_on"]


@asynccontextmanager
async def memory_store_on(backend: str, root: Path | str) -> AsyncIterator[MemoryStore]:
    """The hub's memory store on ``backend``, opened as a hub opens it, and closed afterwards:
    the store every worker shares, where an extension keeps what it must find again after a
    restart (a cursor, a window), for tests of that state on each backend.

    ``backend`` is ``"memory"`` (the process's own), ``"sqlite"`` (``hub.db`` in ``root/data``,
    ``root`` being a test's ``tmp_path``) or ``"postgres"`` (a schema of its own from
    ``hub.testing.postgres``, dropped afterwards: the test is skipped where no server answers,
    and fails where ``CI`` is set).

    Raises:
        ValueError: ``backend`` is none of the three.
    """
    config = temp_config(root)
    stores: dict[str, Any] = {}
    async with AsyncExitStack() as stack:
        if backend == "memory":
            stores = {"memory": InMemoryStore(), "runs": InMemoryRunStore(), "inbox": InMemoryInbox()}
        elif backend == "postgres":
            from .postgres import temporary_schema  # (imports pytest: only where asked for)

            config.store.url = await stack.enter_async_context(temporary_schema())
        elif backend != "sqlite":
            raise ValueError(f"backend {backend!r}: one of 'memory', 'sqlite' or 'postgres'")
        opened = await stack.enter_async_context(open_stores(config, worker="w1", **stores))
        yield opened.memory

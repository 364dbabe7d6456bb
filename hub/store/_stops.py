"""Stop requests: the `StopStore` seam through which a stop reaches the worker that holds a run.

An operator's stop (``hub stop RUN_ID``, ``POST /runs/{id}/stop``, the dashboard) or a user's
``/stop`` may arrive on another process than the one running the run: another ``hub run``
worker sharing PostgreSQL, or ``hub stop`` beside a ``hub run`` on SQLite. The request is a
row here; every worker polls the rows while it has runs in flight, stops the runs it holds
and clears their rows (hub/features/_stops.py). A row nobody takes (its run ended, or died
with its worker) is pruned.

The backends: `hub.store.InMemoryStopStore` (hub/store/_in_memory.py) and
`hub.store.sql.SqlStopStore` (hub/store/sql/_stores.py, table ``run_stops``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

__all__ = ["StopStore"]


class StopStore(ABC):
    """Runs asked to stop, each with the reason it ends ``killed`` with."""

    @abstractmethod
    async def request(self, run_id: str, reason: str) -> None:
        """Ask the worker holding ``run_id`` to stop it; durable when it returns (a second
        request for the same run keeps the first one's reason)."""

    @abstractmethod
    async def requested(self) -> dict[str, str]:
        """Every pending request: run id -> reason."""

    @abstractmethod
    async def clear(self, run_ids: list[str]) -> None:
        """Forget the requests of these runs (they were stopped)."""

    @abstractmethod
    async def prune(self, before: float) -> int:
        """Forget the requests made before ``before`` (epoch seconds) that nobody took; how many."""

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass

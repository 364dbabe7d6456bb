"""Whether the hub's stores work: what ``/healthz``, ``hub health`` and ``/metrics`` report.

The hub fails visibly when a store fails (a run ends ``failed`` with ``store_error``, its
input stays in the inbox) instead of falling back to memory that a restart would lose;
this module is how an operator sees it happen.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .db import Database

if TYPE_CHECKING:
    from .hub import Hub

__all__ = ["databases", "store_health", "StoreCollector"]


def databases(hub: Hub) -> list[Database]:
    """The SQLite databases behind the hub's stores (usually one)."""
    found: list[Database] = []
    candidates: list[Any] = [getattr(hub, "_db", None)]
    for store in (hub.memory, hub.runs, hub.inbox, *hub.ops.stores):
        while store is not None and not isinstance(store, Database):  # through wrappers (redaction)
            candidates.append(getattr(store, "db", None))
            store = getattr(store, "inner", None)
    for db in candidates:
        if isinstance(db, Database) and all(db is not d for d in found):
            found.append(db)
    return found


def store_health(hub: Hub) -> str | None:
    """None while every store works; else why the hub is degraded."""
    problems = [p for p in (db.health() for db in databases(hub)) if p]
    return "; ".join(problems) or None


class StoreCollector(Collector):
    """Store failures as Prometheus metrics (read from the databases when scraped)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    def collect(self) -> Iterator[Any]:
        dbs = databases(self.hub)
        for name, attr, doc in (
            ("hub_store_lost_writes", "lost_writes", "Queued writes that failed with no caller to tell (lost)"),
            ("hub_store_failed_writes", "failed_writes", "Writes that failed and raised StoreError to their caller"),
            ("hub_store_errors", "errors", "Failed store operations of any kind (open, read, write)"),
            ("hub_store_busy_retries", "busy_waits", "Write batches retried because another process held the lock"),
        ):
            c = CounterMetricFamily(name, doc)
            c.add_metric([], sum(getattr(db, attr) for db in dbs))
            yield c
        g = GaugeMetricFamily("hub_store_degraded", "1 while a store is failing (see /healthz)")
        g.add_metric([], 1 if any(db.health() for db in dbs) else 0)
        yield g

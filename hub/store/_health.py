"""Whether the hub's stores work: what ``/healthz``, ``hub health`` and ``/metrics`` report.

The hub fails visibly when a store fails (a run ends ``failed`` with ``store_error``, its
input stays in the inbox) instead of falling back to memory that a restart would lose;
this module is how an operator sees it happen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..errors import StoreError
from .sql import Database, PgDatabase, SqlDatabase

__all__ = ["databases", "StoreHealth", "StoreCollector"]


def databases(*stores: Any) -> list[SqlDatabase]:
    """The databases (SQLite or PostgreSQL) behind ``stores`` (a database itself, or a store holding one,
    through wrappers such as redaction); usually one."""
    found: list[SqlDatabase] = []
    candidates: list[Any] = []
    for store in stores:
        while store is not None and not isinstance(store, (Database, PgDatabase)):
            candidates.append(getattr(store, "db", None))
            store = getattr(store, "inner", None)
        candidates.append(store)
    for db in candidates:
        if isinstance(db, (Database, PgDatabase)) and all(db is not d for d in found):
            found.append(db)
    return found


class StoreHealth:
    """Whether the hub's stores work, read from their databases when asked."""

    def __init__(self, dbs: Iterable[SqlDatabase]) -> None:
        self.dbs = list(dbs)

    def problem(self) -> str | None:
        """None while every store works; else why the hub is degraded."""
        problems = [p for p in (db.health() for db in self.dbs) if p]
        return "; ".join(problems) or None

    async def databases(self, *, timeout: float = 2.0) -> tuple[list[dict[str, Any]], str | None]:
        """What ``/healthz`` says of each database: its backend and where it is, and for
        PostgreSQL whether the server answers now (a round trip, at most ``timeout``
        seconds); with why one does not, if one does not."""
        out: list[dict[str, Any]] = []
        problems: list[str] = []
        for db in self.dbs:
            if not isinstance(db, PgDatabase):
                out.append({"backend": "sqlite", "path": db.path, "schema_version": db.schema_version})
                continue
            item: dict[str, Any] = {
                "backend": "postgresql",
                "url": db.path,
                "schema": db.namespace,
                "server_version": db.server_version,
                "schema_version": db.schema_version,
            }
            try:
                await asyncio.wait_for(db.ping(), timeout)
                item["reachable"] = True
            except (TimeoutError, StoreError) as e:
                item["reachable"] = False
                problems.append(
                    str(e) if isinstance(e, StoreError) else f"PostgreSQL {db.path}: no answer in {timeout}s"
                )
            out.append(item)
        return out, "; ".join(problems) or None


class StoreCollector(Collector):
    """Store failures as Prometheus metrics (read from the databases when scraped)."""

    def __init__(self, health: StoreHealth) -> None:
        self.health = health

    def collect(self) -> Iterator[Any]:
        dbs = self.health.dbs
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

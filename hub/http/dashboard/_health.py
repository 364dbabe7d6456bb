"""The dashboard's health page: a bounded history of the hub's own metrics.

`MetricsHistory` reads the hub's Prometheus registry (hub/features/_metrics.py) every
``interval`` seconds and keeps the last ``size`` samples in a ring: runs in progress, queue
depth, the model's mean first-token latency over the interval, and per interval the 429s,
the sends that failed and the tokens used; `MetricsHistory.buckets()` cuts a window of
them into spans for the charts (hub/http/dashboard/_charts.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ...tasks import cancel_and_wait

__all__ = ["Sample", "MetricsHistory", "metric_total", "last_value", "SERIES"]

log = logging.getLogger("hub.http.dashboard")


@dataclass(frozen=True, slots=True)
class Sample:
    ts: float
    running: int
    queued: int
    llm_latency_ms: float | None  # mean over the interval; None when no step asked the model
    rate_limited: float  # 429s from platforms in the interval
    send_errors: float
    tokens: float


SERIES: dict[str, tuple[str, str, str]] = {
    "running": ("runs in progress", "", "max"),
    "queued": ("queue depth", "", "max"),
    "llm_latency_ms": ("model latency (first token)", "ms", "mean"),
    "rate_limited": ("429s from platforms", "", "sum"),
    "send_errors": ("sends that failed", "", "sum"),
}
"""Each charted field of `Sample`: its title, unit, and how a span of samples adds up
(the tokens are charted from the run store, which also holds the runs before this process)."""


def metric_total(registry: Any, name: str, **labels: str) -> float:
    """The sum of every sample called ``name`` whose labels include ``labels`` (0 if none)."""
    total = 0.0
    for family in registry.collect():
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


class MetricsHistory:
    """Samples the hub's metrics into a ring of ``size`` (a component of the dashboard).

    ``registry`` is the hub's Prometheus registry; ``gauges`` returns (running, queued) now.
    """

    def __init__(
        self,
        registry: Any,
        gauges: Callable[[], tuple[int, int]],
        *,
        interval: float = 5.0,
        size: int = 120,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry
        self.gauges = gauges
        self.interval = interval
        self.samples: deque[Sample] = deque(maxlen=size)
        self._clock = clock
        self._last: dict[str, float] | None = None
        self._task: asyncio.Task[None] | None = None

    def _totals(self) -> dict[str, float]:
        return {
            "latency_sum": metric_total(self.registry, "hub_llm_latency_seconds_sum"),
            "latency_count": metric_total(self.registry, "hub_llm_latency_seconds_count"),
            "rate_limited": metric_total(self.registry, "hub_platform_rate_limited_total"),
            "send_errors": metric_total(self.registry, "hub_platform_sends_total", result="error"),
            "tokens": metric_total(self.registry, "hub_tokens_total"),
        }

    def sample(self) -> Sample | None:
        """Take one sample (the first call only sets the baseline of the counters)."""
        now = self._totals()
        last, self._last = self._last, now
        if last is None:
            return None
        d = {k: max(0.0, now[k] - last[k]) for k in now}
        running, queued = self.gauges()
        latency = d["latency_sum"] / d["latency_count"] * 1000 if d["latency_count"] else None
        s = Sample(self._clock(), running, queued, latency, d["rate_limited"], d["send_errors"], d["tokens"])
        self.samples.append(s)
        return s

    async def start(self) -> None:
        if self._task is None:
            self.sample()
            self._task = asyncio.create_task(self._run(), name="ui:metrics-history")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.sample()
            except Exception:  # a sampler that dies would freeze the charts without a word
                log.exception("dashboard: sampling the metrics failed")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    def series(self, name: str) -> list[float | None]:
        return [getattr(s, name) for s in self.samples]

    def latest(self, name: str) -> float | None:
        """The newest value of series ``name`` (None: no sample has one), read from the end."""
        for s in reversed(self.samples):
            v = getattr(s, name)
            if v is not None:
                return float(v)
        return None

    def buckets(self, name: str, *, start: float, width: float, n: int, how: str) -> list[float | None]:
        """Series ``name`` in ``n`` spans of ``width`` seconds from ``start``: per span its
        ``how`` ("max" for a level, "mean" for a latency, "sum" for a count), None where no
        sample falls (the hub was not running, or the span is in the future)."""
        acc: list[list[float]] = [[] for _ in range(n)]
        for s in reversed(self.samples):  # newest first: a short window reads only its end
            if s.ts < start:
                break
            i = int((s.ts - start) // width)
            v = getattr(s, name)
            if i < n and v is not None:
                acc[i].append(v)
        out: list[float | None] = []
        for vals in acc:
            if not vals:
                out.append(None)
            elif how == "max":
                out.append(max(vals))
            elif how == "mean":
                out.append(sum(vals) / len(vals))
            else:
                out.append(sum(vals))
        return out


def last_value(values: Iterable[float | None]) -> float | None:
    last = None
    for v in values:
        if v is not None:
            last = v
    return last

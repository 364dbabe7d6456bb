"""The hub's Prometheus metrics, in a registry of its own (two hubs in one process never collide).

The engine feeds them through the plugin hooks (`Metrics` is a plugin); platform extensions
report their sends and rate limits through `Metrics.platform_send()` and
`Metrics.platform_429()`. ``GET /metrics`` (hub/http/_server.py) serves `Metrics.render()`.

Labels stay bounded: context *types*, output types, platform, schedule and webhook names;
never a chat id or a user. Every labelled counter has its series at 0 for the label values
known at start (`Metrics.declare()`), so ``rate(hub_runs_total{state="failed"}[5m])``
is 0, not "no data", before the first failure. The standard ``process_*`` and
``python_*`` collectors and ``hub_build_info`` are in the registry too.

``/metrics`` answers the OpenMetrics format when the scraper asks for it (Prometheus
does), else the classic text format (`Metrics.render()`), without the ``*_created``
samples that format would show as gauge families of their own.
"""

from __future__ import annotations

import importlib.metadata
import platform
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    GC_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric

from ..definitions import RunContext, RunResult
from ..engine import Plugin, Runner
from ..errors import ModelError
from ..logs import OutputLog, StepLog, VoiceLog
from ..models.failover import OUTCOMES as MODEL_OUTCOMES
from ..store import RunState, StoreCollector, StoreHealth

__all__ = ["Metrics", "CONTENT_TYPE"]

CONTENT_TYPE = CONTENT_TYPE_LATEST

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
_DURATION_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: What kinds of model error are told apart: by the status the model answered.
MODEL_ERROR_KINDS = ("rate_limited", "server_error", "client_error", "unreachable")


def model_error_kind(e: ModelError) -> str:
    """429, 5xx, another status, or none at all (a timeout, a refused connection)."""
    if e.status is None:
        return "unreachable"
    if e.status == 429:
        return "rate_limited"
    return "server_error" if e.status >= 500 else "client_error"


class Metrics(Plugin):
    """Counters, gauges and histograms of one hub. Created by the hub; use ``hub.metrics``.

    ``runner`` feeds the gauges (runs in progress, queue depth, steps waiting for the LLM).
    ``context_type_of`` names the context type of a run that ended before its context was
    made (the registry's: a key may hold colons, so no colon says where the type ends).
    """

    name = "metrics"

    def __init__(
        self,
        runner: Runner,
        *,
        health: StoreHealth | None = None,
        context_type_of: Callable[[str], str] | None = None,
    ) -> None:
        self._context_type_of = context_type_of
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}  # see _child
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.runs = Counter(
            "hub_runs", "Runs ended, by terminal state and context type", ["state", "context_type"], registry=r
        )
        self.steps = Counter("hub_run_steps", "Steps taken by runs", ["context_type"], registry=r)
        self.tokens = Counter(
            "hub_tokens",
            "LLM tokens used, by kind (prompt, completion; cached: the prompt tokens the provider served from its cache)",
            ["kind"],
            registry=r,
        )
        self.cost = Counter(
            "hub_cost", "What the LLM calls cost, at [model] price_input and price_output (0: unknown)", registry=r
        )
        self.voice_seconds = Counter(
            "hub_voice_seconds", "Seconds of audio heard (transcribed) and spoken, [voice]", ["direction"], registry=r
        )
        self.llm_latency = Histogram(
            "hub_llm_latency_seconds",
            "Time from a step's request to the model's first chunk",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.run_duration = Histogram(
            "hub_run_duration_seconds", "Wall time of ended runs", buckets=_DURATION_BUCKETS, registry=r
        )
        self.outputs = Counter(
            "hub_outputs", "Outputs handled, by output type and result (sent, failed)", ["type", "result"], registry=r
        )
        self.platform_sends = Counter(
            "hub_platform_sends",
            "Requests that send to a platform, by result (ok, error)",
            ["platform", "result"],
            registry=r,
        )
        self.platform_rate_limited = Counter(
            "hub_platform_rate_limited", "429 (rate limited) answers from a platform", ["platform"], registry=r
        )
        self.platform_connections = Gauge(
            "hub_platform_connected",
            "Connections to a platform that are up on this worker (0: down, or another worker holds the listener)",
            ["platform"],
            registry=r,
        )
        self.webhooks = Counter(
            "hub_webhook_requests", "Webhook requests, by webhook and HTTP status", ["webhook", "status"], registry=r
        )
        self.schedule_fires = Counter("hub_schedule_fires", "Inputs sent by schedules", ["schedule"], registry=r)
        self.schedule_skips = Counter(
            "hub_schedule_skips",
            "Fires of skip_unchanged schedules not sent: input and conversation unchanged since the last run",
            ["schedule"],
            registry=r,
        )
        self.background_skips = Counter(
            "hub_background_skipped",
            "Background runs skipped because [limits] background_cost_per_day was spent, by trigger "
            "(schedule, reminder, webhook, child)",
            ["trigger"],
            registry=r,
        )
        for trigger in ("schedule", "reminder", "webhook", "child"):
            self.background_skips.labels(trigger)
        Gauge("hub_runs_running", "Runs in progress", registry=r).set_function(lambda: runner.running)
        Gauge("hub_queue_depth", "Inputs waiting for their context's next step or run", registry=r).set_function(
            lambda: runner.queued
        )
        Gauge("hub_llm_waiting", "Steps waiting for a free LLM slot", registry=r).set_function(
            lambda: runner.llm_waiting
        )
        self.model_errors = Counter(
            "hub_model_errors",
            "Errors the model answered (each attempt), by kind: rate_limited (429), server_error (5xx), "
            "client_error (another status), unreachable (a timeout, a refused connection)",
            ["kind"],
            registry=r,
        )
        self.model_requests = Counter(
            "hub_model_requests",
            "Requests to each named model ([model] is 'model'), by outcome: ok, rate_limited, server_error, "
            "unreachable, key_refused, client_error, skipped (its circuit open, or every key resting)",
            ["model", "outcome"],
            registry=r,
        )
        self.model_retries = Counter(
            "hub_model_retries", "Model requests sent again after a retryable error", registry=r
        )
        for kind in MODEL_ERROR_KINDS:
            self.model_errors.labels(kind)
        for kind in ("prompt", "completion", "cached"):
            self.tokens.labels(kind)
        if health is not None:  # lost writes, store errors, degraded (issues 11, 16)
            r.register(StoreCollector(health))
        # the standard collectors (process_*, python_info, python_gc_*) and what runs
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        if GC_COLLECTOR is not None:
            GCCollector(registry=r)
        Info("hub_build", "The hub's version and the Python it runs on", registry=r).info(
            {"version": _version(), "python": platform.python_version()}
        )

    def declare(
        self,
        *,
        context_types: Iterable[str] = (),
        output_types: Iterable[str] = (),
        schedules: Iterable[str] = (),
        models: Iterable[str] = (),
    ) -> None:
        """Create the series of the label values known at start, at 0 (the hub calls it
        once its extensions are installed)."""
        for model in models:
            for outcome in MODEL_OUTCOMES:
                self.model_requests.labels(model, outcome)
        for ctype in context_types:
            for state in (s for s in RunState if s is not RunState.RUNNING):
                self.runs.labels(str(state), ctype)
            self.steps.labels(ctype)
        for otype in output_types:
            for result in ("sent", "failed"):
                self.outputs.labels(otype, result)
        for name in schedules:
            self.schedule_fires.labels(name)

    def watch_episodes(self, *, waiting: Callable[[], int], parked: Callable[[], int]) -> None:
        """Gauges of episodic memory's outbox: episodes waiting for the vector store, and
        those parked after the store refused them (hub.memory's outbox)."""
        r = self.registry
        Gauge("hub_episodes_waiting", "Episodes waiting in the outbox for the vector store", registry=r).set_function(
            waiting
        )
        Gauge(
            "hub_episodes_parked",
            "Episodes the vector store refused repeatedly, parked until the next start",
            registry=r,
        ).set_function(parked)

    def declare_platform(self, platform: str) -> None:
        """Create ``platform``'s send and 429 series at 0 (its governor does, at start)."""
        for result in ("ok", "error"):
            self.platform_sends.labels(platform, result)
        self.platform_rate_limited.labels(platform)

    def model_error(self, e: ModelError, retried: bool) -> None:
        """Count one error the model answered, and whether it is sent again."""
        self.model_errors.labels(model_error_kind(e)).inc()
        if retried:
            self.model_retries.inc()

    def model_request(self, model: str, outcome: str) -> None:
        """Count one request to a named model (or one skipped), by outcome."""
        self._child(self.model_requests, model, outcome).inc()

    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, kept: the client's lookup (a lock, the values checked)
        cost a turn's hot path about as much as its prompt's escaping. The hub never removes
        a series, so a kept child stays the one the registry exports."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    # --- the API for extensions ---------------------------------------------------------

    def platform_send(self, platform: str, ok: bool = True) -> None:
        """Count one request that sends to ``platform`` (a message, a post, a reply)."""
        self.platform_sends.labels(platform, "ok" if ok else "error").inc()

    def platform_429(self, platform: str) -> None:
        """Count one rate-limited (429) answer from ``platform``."""
        self.platform_rate_limited.labels(platform).inc()

    def platform_connected(self, platform: str, connections: int | bool) -> None:
        """Say how many of this worker's connections to ``platform`` are up now (True: 1):
        a poll that succeeded, a gateway that is ready; 0 when it fails or stops."""
        self.platform_connections.labels(platform).set(int(connections))

    # --- fed by the hub -----------------------------------------------------------------

    def webhook(self, name: str, status: int) -> None:
        self.webhooks.labels(name, str(status)).inc()

    def schedule_fired(self, name: str) -> None:
        self.schedule_fires.labels(name).inc()

    def schedule_skipped(self, name: str) -> None:
        self.schedule_skips.labels(name).inc()

    def background_skipped(self, trigger: str) -> None:
        self.background_skips.labels(trigger).inc()

    def after_step(self, ctx: RunContext, step: StepLog) -> None:
        self._child(self.steps, ctx.context.type).inc()
        self._child(self.tokens, "prompt").inc(step.prompt_tokens)
        self._child(self.tokens, "completion").inc(step.completion_tokens)
        if step.cached_tokens:
            self._child(self.tokens, "cached").inc(step.cached_tokens)
        if step.cost > 0:
            self.cost.inc(step.cost)
        if step.llm_latency > 0:
            self.llm_latency.observe(step.llm_latency)
        return None

    def model_usage(self, prompt_tokens: int, completion_tokens: int, cost: float) -> None:
        """Count a model call made outside a step (an episode's summary)."""
        self.tokens.labels("prompt").inc(prompt_tokens)
        self.tokens.labels("completion").inc(completion_tokens)
        if cost > 0:
            self.cost.inc(cost)

    def on_output(self, ctx: RunContext, out: OutputLog) -> None:
        self._child(self.outputs, out.type, "sent" if out.sent else "failed").inc()

    async def after_run(self, result: RunResult, ctx: RunContext | None) -> None:
        if ctx is not None:
            ctype = ctx.context.type
        else:
            ctype = self._context_type_of(result.context) if self._context_type_of is not None else ""
        self._child(self.runs, str(result.state), ctype).inc()
        self.run_duration.observe(max(0.0, result.duration))
        for e in result.logs:  # [voice]: what no step counted
            if isinstance(e, VoiceLog):
                self.voice_seconds.labels(e.direction).inc(e.seconds)
                if e.cost > 0:
                    self.cost.inc(e.cost)

    def render(self, accept: str | None = None) -> tuple[bytes, str]:
        """Every metric, in the format the ``Accept`` header asks for: OpenMetrics when it
        names ``application/openmetrics-text``, else the classic text format. Returns the
        body and its content type."""
        encoder, content_type = choose_encoder(accept or "")
        if content_type.startswith("application/openmetrics-text"):
            return encoder(self.registry), content_type
        return encoder(_WithoutCreated(self.registry)), content_type


class _WithoutCreated:
    """The registry less its ``*_created`` samples: the classic text format would show each
    as a gauge family of its own, and a scraper that does not negotiate OpenMetrics stores
    them as series. Creation times stay in OpenMetrics, where they belong to their family."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Metric]:
        for metric in self._registry.collect():
            created = metric.name + "_created"
            copy = Metric(metric.name, metric.documentation, metric.type, metric.unit)
            copy.samples = [s for s in metric.samples if s.name != created]
            yield copy


def _version() -> str:
    try:
        return importlib.metadata.version("hub")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "unknown"

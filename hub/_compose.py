"""The composition root: the one place that builds a hub's features from its config.

`compose()` makes every feature once, hands each what it needs (a store, the runner,
the hub's ``submit`` or output registry, never the hub itself), and returns them as
`Features`: the ordered `Plugins` through which they take part in
runs, and the components the hub starts and stops. Nothing is attached or replaced later.

Plugin order is the order of the hooks: the run stops first (a run is known to be in flight,
and so can be stopped, from its first hook on); then the daily budgets (``limits``), so a
spent budget stops a run before anything else sees it; the background spend (schedules,
webhooks, reminders and child runs, ``[limits] background_cost_per_day``); the failure reply; then the role
guard, the metrics, child runs, the message history (search_history, the dashboard's search) and
episodic memory.

Where a new feature goes: a class in its own module that subclasses
`Plugin` (and has ``start``/``stop`` if it runs in the background),
built here with its dependencies and added to the plugins (and components).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from .config import PRIMARY_MODEL, HubConfig, ModelSection
from .definitions import Action, Approver, Context, Conversation, Output, RunContext
from .engine import Decoder, Plugins, Runner
from .errors import ConfigError
from .events import EventBus, PublishingRunStore
from .features import (
    Approvals,
    BackgroundSpend,
    Budgets,
    ChildRuns,
    FailureReply,
    Heartbeat,
    HistoryIndex,
    Metrics,
    Reminders,
    RoleGuard,
    RunStops,
    Scheduler,
)
from .http import HttpServer, http_component
from .memory import EpisodicMemory, TrainingExport, local_store_path, open_episode_store, shared_embedder
from .models import Circuit, Model, RetryPolicy, Usage
from .personas import REVISION_PREFIX, Persona, PersonaSet, PersonaWatcher, SkillSet
from .platform import OutboundLimiter, RedisLimiter
from .protocol import PromptBuilder
from .redact import Redactor
from .store import (
    RedactingRunStore,
    Retention,
    RevisionStore,
    RunStore,
    StoreHealth,
    Stores,
    Upkeep,
    UsageStore,
)
from .voice import Voice

__all__ = ["Component", "Features", "compose", "make_model", "mcp_servers", "prompt_budget", "recorded_runs"]

LOCAL_MARGIN = 64
"""Tokens of the local model's context window kept free of the prompt (template, rounding)."""


class Component(Protocol):
    """A built-in part with a lifecycle (started after extensions' services, stopped before)."""

    async def start(self, hub: Any) -> None: ...

    async def stop(self) -> None: ...


def recorded_runs(runs: RunStore, *, bus: EventBus | None, redactor: Redactor) -> RunStore:
    """The run store as the hub records through it: each entry published on ``bus`` (inside
    the redaction, so what subscribers see is masked too), and known secrets masked in error
    reasons and messages (an exception's text can quote one), the one text that does not
    enter through an input, a result or the model."""
    if bus is not None:
        runs = cast(RunStore, PublishingRunStore(runs, bus))
    if redactor:
        runs = RedactingRunStore(runs, redactor)
    return runs


@dataclass(slots=True)
class Features:
    """Everything `compose()` built, in the order the hub uses it."""

    redactor: Redactor
    prompts: PromptBuilder
    plugins: Plugins
    components: list[Component]
    metrics: Metrics
    budgets: Budgets
    background: BackgroundSpend
    guard: RoleGuard
    children: ChildRuns
    scheduler: Scheduler
    revisions: RevisionStore
    usage: UsageStore
    decoder: Decoder
    stops: RunStops
    approvals: Approvals
    http: HttpServer | None = None
    episodes: EpisodicMemory | None = None
    outbound: OutboundLimiter | None = None  # [store] redis_url: platforms' rate limits across workers
    mcp: Any = None  # [mcp.*]: hub.mcp.McpServers, whose tools are actions (None: no server configured)
    skills: SkillSet | None = None  # [agent] skills_dir, when the folder exists
    voice: Voice | None = None  # [voice]: voice notes heard, replies spoken
    reminders: Reminders | None = None  # [agent] reminders
    history: HistoryIndex | None = None  # every run's messages, for search_history and the dashboard


def _persona_zone(persona: Persona | None) -> str | None:
    return persona.timezone if persona is not None else None


def make_model(
    config: HubConfig,
    *,
    name: str = PRIMARY_MODEL,
    observe: Callable[[str, str], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> Model:
    """The model the config asks for, by table (``"model"``: ``[model]``, else ``[models.NAME]``).

    A local GGUF model with no fallbacks is itself. Otherwise it is a
    `FailoverModel` of the table and its ``fallbacks``, each with a
    client per key: ``observe(model, outcome)`` hears of each request (the metrics), ``clock``
    drives the breakers and resting keys (tests; default ``time.monotonic``).

    Raises:
        KeyError: no such table.
    """
    section = config.model_section(name)
    if section.resolved_provider() == "local" and not section.fallbacks:
        return _client(section, "")
    from .models.failover import Candidate, FailoverModel

    candidates = []
    for table in (name, *section.fallbacks):
        m = config.model_section(table)
        keys = m.keys if m.resolved_provider() == "openai" else []
        circuit = Circuit(failures=m.circuit_failures, cooldown=m.circuit_cooldown, clock=clock or time.monotonic)
        clients = [_client(m, key) for key in keys or [""]]
        candidates.append(Candidate(table, clients, circuit, keys=keys))
    return FailoverModel(candidates, observe=observe)


def _client(m: ModelSection, key: str) -> Model:
    """One client of one model table, with one key."""
    if m.resolved_provider() == "local":
        from .models.local import LocalModel

        return LocalModel(
            m.model_path or None,
            context_length=m.context_length,
            threads=m.threads,
            timeout=m.timeout,
            temperature=m.temperature if m.temperature is not None else 0.4,
            max_tokens=m.max_tokens or 192,
        )
    from .models.openai import OpenAIModel

    return OpenAIModel(
        m.name,
        base_url=m.base_url or None,
        api_key=key or None,
        timeout=m.timeout,
        temperature=m.temperature,
        max_tokens=m.max_tokens,
        concurrency=m.concurrency,
    )


def prompt_budget(config: HubConfig, model: Model | None = None) -> int:
    """The prompt's token budget: ``[agent] prompt_budget``, and for a model with a context
    window of its own (the local one) never more than that window leaves once the answer
    (``max_tokens``) has its room. ``model`` is the hub's replacement model, if any."""
    budget = config.agent.prompt_budget
    m = config.model
    window: object
    answer: object
    if model is None:
        if m.resolved_provider() != "local":
            return budget
        window, answer = m.context_length, m.max_tokens
    else:
        window, answer = getattr(model, "context_length", None), getattr(model, "max_tokens", None)
        if not isinstance(window, int):
            return budget  # a server's model: its window is the server's business
    return min(budget, window - (answer if isinstance(answer, int) else 192) - LOCAL_MARGIN)


def compose(
    config: HubConfig,
    *,
    stores: Stores,
    runner: Runner,
    runs: RunStore,
    outputs: Mapping[str, Output],
    personas: PersonaSet,
    submit: Callable[..., Awaitable[Any]],
    resolve: Callable[[str], tuple[Context, Any, str]],
    persona_for: Callable[[Conversation], Persona | None],
    started: Callable[[], bool],
    model: Callable[[], Model],
    retry_policy: RetryPolicy,
    given_model: Model | None = None,
    heartbeat: Path | None = None,
    redactor: Redactor | None = None,
    health: StoreHealth | None = None,
    publish_actions: Callable[[str, Sequence[Action]], list[str]] | None = None,
    context_type_of: Callable[[str], str] | None = None,
    model_problems: Callable[[], dict[str, str]] | None = None,
    approver_of: Callable[[str | None], Approver | None] | None = None,
) -> Features:
    """Build a hub's features from ``config``, its ``stores`` (``runs`` is the hub's run store,
    the one it records through) and the hub's own parts (see the module doc).
    ``publish_actions(owner, actions)``: how tools that come and go (MCP servers') reach the registry."""
    redactor = redactor if redactor is not None else Redactor.from_config(config)
    prompts = PromptBuilder(budget=prompt_budget(config, given_model), redactor=redactor)

    db = stores.db
    usage, revisions = stores.usage, stores.revisions
    if personas.on_change is None:  # every persona edit that validates becomes a revision
        personas.on_change = lambda name, persona, text: revisions.record(name, text)

    budgets = Budgets(config.limits, usage, outputs=outputs, runs=runs)
    stops = RunStops(runs, stores.stops)
    failure_reply = FailureReply(
        config,
        outputs=outputs,
        runs=runs,
        persona_for=persona_for,
        owed=stores.memory,
        resolve=resolve,
    )
    guard = RoleGuard(config.roles)
    approvals = Approvals(
        stores.approvals,
        settings=config.approvals,
        roles_of=guard.roles_of,
        approver_of=approver_of or (lambda extension: None),
        outputs=outputs,
        runs=runs,
    )
    health = health if health is not None else StoreHealth([db] if db is not None else [])
    metrics = Metrics(runner, health=health, context_type_of=context_type_of)
    background = BackgroundSpend(config.limits, usage, skipped=metrics.background_skipped)
    children = ChildRuns(
        submit=submit,
        resolve=resolve,
        persona_for=persona_for,
        runner=runner,
        run_timeout=config.agent.run_timeout,
        heartbeat_timeout=config.agent.heartbeat_timeout,
    )
    episodes = None
    if config.memory.episodes:
        episodes = EpisodicMemory(
            config.memory,
            open_store=functools.partial(_open_episodes, config),
            model=model,
            runner=runner,
            retry_policy=retry_policy,
            model_timeout=config.model.timeout,
            marks=stores.memory,
            store_path=local_store_path(config),
            on_usage=lambda ctx, usage: _count_usage(config, budgets, metrics, ctx, usage),
        )
    training = TrainingExport(config, redactor) if config.memory.export_training else None
    history = HistoryIndex(stores.history, redactor=redactor if redactor else None)  # (hub/features/_history.py)
    plugins = Plugins(
        [
            stops,
            budgets,
            background,
            failure_reply,
            guard,
            approvals,  # after the role guard: a call it denies is never put to a person
            metrics,
            children,
            history,
            *([episodes] if episodes is not None else []),
            *([training] if training is not None else []),
        ]
    )

    scheduler = Scheduler(
        stores.schedules,
        schedules=config.schedules,
        personas=personas,
        submit=submit,
        resolve=resolve,
        started=started,
        fired=metrics.schedule_fired,
        config_path=config.path,
        memory=stores.memory,
        skipped=metrics.schedule_skipped,
    )
    reminders = None
    if config.agent.reminders:  # set in conversations, fired as their inputs (hub/features/_reminders.py)
        reminders = Reminders(
            stores.reminders,
            memory=stores.memory,
            submit=submit,
            started=started,
            cap=config.limits.reminders_per_user,
            timezone=config.agent.timezone,
            persona_zone=lambda conversation: _persona_zone(persona_for(conversation)),
        )
    http = http_component(config)
    # inbound pictures and PDFs: worker processes of their own, bounded (hub/engine/_decoding.py)
    decoder = Decoder(config.media_limits())
    mcp = mcp_servers(config, publish_actions)
    skills = None
    skills_dir = config.resolve(config.agent.skills_dir) if config.agent.skills_dir else None
    if skills_dir is not None and skills_dir.is_dir():  # versioned like personas: the same store and watcher
        skills = SkillSet(skills_dir, on_change=lambda name, text: revisions.record(REVISION_PREFIX + name, text))
    # failure_reply: the replies a killed hub owed are sent once the platforms are up
    components: list[Component] = [
        PersonaWatcher(personas, skills=skills),
        scheduler,
        stops,
        approvals,
        decoder,
        failure_reply,
    ]
    voice = Voice(config) if config.voice is not None else None
    if voice is not None:  # its client closed at the hub's stop
        components.append(voice)
    if reminders is not None:
        components.append(reminders)
    if mcp is not None:  # first: their tools are there before the first input is taken
        components.insert(0, mcp)
    if db is not None:  # the database stays bounded
        components.append(Retention(db, config.hub.retention))
    components.append(
        Upkeep(stores.pairings, config.hub.retention, reviews=stores.reviews)
    )  # what no conversation owns
    if http is not None:
        components.append(http)
    if episodes is not None:
        components.append(episodes)
        outbox = episodes.outbox
        metrics.watch_episodes(waiting=lambda: outbox.waiting, parked=lambda: outbox.parked)
    if training is not None:
        components.append(training)
    if heartbeat is not None:
        notes = episodes.health if episodes is not None else None  # said by `hub health`, not a failure
        components.append(Heartbeat(heartbeat, health=health.problem, notes=notes, models=model_problems))
    return Features(
        redactor=redactor,
        prompts=prompts,
        plugins=plugins,
        components=components,
        metrics=metrics,
        budgets=budgets,
        background=background,
        guard=guard,
        children=children,
        scheduler=scheduler,
        revisions=revisions,
        usage=usage,
        decoder=decoder,
        stops=stops,
        approvals=approvals,
        http=http,
        episodes=episodes,
        outbound=RedisLimiter(config.store.redis_url) if config.store.redis_url else None,
        mcp=mcp,
        skills=skills,
        voice=voice,
        reminders=reminders,
        history=history,
    )


def mcp_servers(config: HubConfig, publish: Callable[[str, Sequence[Action]], list[str]] | None) -> Any:
    """``[mcp.*]``'s servers (hub.mcp), or None when none is enabled. The SDK is the ``mcp``
    extra: imported only when a server is configured.

    Raises:
        ConfigError: a server is configured and the extra is not installed.
    """
    if not any(s.enabled for s in config.mcp.values()):
        return None
    try:
        from .mcp import McpServers
    except ImportError as e:
        raise ConfigError(
            f"[mcp.*] servers need the mcp extra: pip install 'hub[mcp]' ({e})",
            path=str(config.path) if config.path else None,
            key="mcp",
        ) from e
    return McpServers(config, publish=publish, log_dir=config.data_dir / "mcp")


def _open_episodes(config: HubConfig, embedder: Any) -> Any:
    return open_episode_store(config, embedder=embedder or shared_embedder())


def _count_usage(config: HubConfig, budgets: Budgets, metrics: Metrics, ctx: RunContext | None, usage: Usage) -> None:
    """A model call outside a step (an episode's summary), counted as the run's: budgets,
    costs and token metrics."""
    cost = config.model.cost(usage.prompt_tokens, usage.completion_tokens)
    budgets.count(ctx, usage.prompt_tokens + usage.completion_tokens, cost)
    metrics.model_usage(usage.prompt_tokens, usage.completion_tokens, cost)

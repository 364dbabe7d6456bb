"""The [`Hub`][hub.Hub]: registries, stores, the runner and the engine, with an explicit lifecycle.

Use it as an async context manager (``async with Hub(config) as hub``); ``start`` and
``stop`` are idempotent. Everything a hub holds lives on the instance: two hubs in one
process share nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from ._compose import Component, compose, make_model, prompt_budget, recorded_runs
from .config import PRIMARY_MODEL, HubConfig, RouteSection
from .definitions import (
    Action,
    Approver,
    CommandCall,
    Context,
    ContextInstance,
    Conversation,
    Extension,
    Input,
    Output,
    Registry,
    Route,
    RunResult,
    validation_message,
)
from .definitions import load_extensions as _load_extensions
from .engine import AgentContext, Commands, Engine, EngineDeps, Intake, ModelAccess, Runner, Submission
from .errors import ConfigError, ExtensionError, ExtensionFailed, RunError
from .events import EventBus, EventStream
from .features import STOPPED_BY_OPERATOR, Access
from .http import web_chat_extension
from .logs import MediaPart
from .models import Model, RetryPolicy
from .personas import Persona, PersonaSet
from .redact import Redactor
from .store import (
    InboxStore,
    LeaseKeeper,
    LeaseStore,
    MemoryStore,
    People,
    RunRecord,
    RunStore,
    StoreHealth,
    databases,
    finish_forgetting,
    open_stores,
    worker_id,
)
from .store.sql import SqlDatabase
from .tasks import TaskGroup

__all__ = ["Hub", "Component", "make_model"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class _Lifecycle(Enum):
    NEW = "new"
    STARTING = "starting"
    STARTED = "started"
    STOPPING = "stopping"
    STOPPED = "stopped"


class Hub:
    """One agent hub: the extensions, the stores, the model and the runs, in one asyncio process.

    Build it from a [`HubConfig`][hub.HubConfig], start it with ``async with Hub(config) as
    hub:`` (or [`start`][hub.Hub.start] and [`stop`][hub.Hub.stop]), and send it inputs with
    [`send`][hub.Hub.send] or [`submit`][hub.Hub.submit]; its platforms' inputs send their own
    once it started. Everything but the config may be replaced, for tests and embedding
    programs. Its features (budgets, the role guard, metrics, child runs, episodic memory,
    schedules, HTTP) are built from the config once, here.

    Args:
        config: The validated config; None: the defaults.
        model: The model to use instead of the one ``[model]`` describes (a
            [`ScriptedModel`][hub.ScriptedModel] in tests).
        memory: The key-value store of conversations' memory, instead of the configured one.
        runs: The run store, instead of the configured one.
        inbox: The inbox of inputs not yet handled, instead of the configured one.
        leases: The lease store, instead of the configured one.
        extensions: Extensions to register besides those the config turns on.
        load_extensions: Whether to load the extensions ``[extensions.NAME]`` names (by their
            entry points); False: only ``extensions``.
        personas: The persona files, instead of those in ``[hub] contexts_dir``.
        heartbeat: A file to touch while the hub runs (``hub run`` passes the one ``hub
            health`` reads).
        worker: Its identity as a lease holder and inbox claimant (default: host, pid and a
            random suffix).

    Raises:
        ExtensionError: an extension ``[extensions.NAME]`` names cannot be loaded, or two
            define the same name.
    """

    def __init__(
        self,
        config: HubConfig | None = None,
        *,
        model: Model | None = None,
        memory: MemoryStore | None = None,
        runs: RunStore | None = None,
        inbox: InboxStore | None = None,
        leases: LeaseStore | None = None,
        extensions: Sequence[Extension] = (),
        load_extensions: bool = True,
        personas: PersonaSet | None = None,
        heartbeat: Path | None = None,
        worker: str | None = None,
    ) -> None:
        self.config = config or HubConfig()
        """The config the hub was built from."""
        self.redactor = Redactor.from_config(self.config)
        """Masks the config's secrets (tokens, keys) in what the hub logs, stores and shows."""
        # run events (hub/events.py): every entry the run store records is published, masked
        self.bus = EventBus()
        # who this hub is among workers (inbox claims) and as a lease holder: unique per hub,
        # unless the caller knows better (`hub run` holding the data dir's lock on SQLite is
        # the only worker there can be)
        self.worker = worker or worker_id()
        # every store, on the backend the config names (hub/store/_backend.py), or those given
        self.stores = open_stores(self.config, worker=self.worker, memory=memory, runs=runs, inbox=inbox, leases=leases)
        self._db: SqlDatabase | None = self.stores.db
        self.memory: MemoryStore = self.stores.memory
        """The key-value store conversations, actions and extensions keep their state in."""
        self.platform_problems: dict[str, str] = {}
        """Platforms that stopped working, and why ([`platform_problem()`][hub.Hub.platform_problem])."""
        self.runs: RunStore = recorded_runs(self.stores.runs, bus=self.bus, redactor=self.redactor)
        self.inbox: InboxStore = self.stores.inbox
        # listeners that must run once across workers sharing the store hold a lease (hub/store/_leases.py)
        self.leases: LeaseStore = self.stores.leases
        self._model = model
        self._given_model = model is not None
        self._named_models: dict[str, Model] = {}  # [models.NAME] that [[routes]] name, made on first use
        self.personas = personas or PersonaSet(self.config.contexts_dir, interval=1.0)
        m = self.config.model
        self.prompt_style = m.prompt_style
        self.retry_policy = RetryPolicy(m.max_retries, m.retry_base_delay, m.retry_max_delay)
        # every background task of the hub: runs, listeners, pollers, retries (create_task)
        self.tasks = TaskGroup()
        # a step takes at most 3 characters of input per token of prompt (about 3/4 of it)
        self.runner = Runner(concurrency=m.concurrency, take_chars=3 * prompt_budget(self.config, model))

        self.registry = Registry()
        # the registries by name, as extensions and handlers read them (the same dicts)
        self.extensions: dict[str, Extension] = self.registry.extensions
        """The registered extensions, by name."""
        self.contexts: dict[str, Context] = self.registry.contexts
        """Every context type the extensions declared, by type."""
        self.actions: dict[str, Action] = self.registry.actions
        """Every action the model may be offered, by name."""
        self.outputs: dict[str, Output] = self.registry.outputs
        """Every output type, by type."""
        self.inputs: dict[str, Input] = self.registry.inputs
        """Every input, by name."""
        self.routes: dict[str, Route] = self.registry.routes  # served by the [http] endpoint
        """The extensions' HTTP routes, by path."""
        self._stops: list[Callable[[], Awaitable[None]]] = []
        self._started_services: list[Any] = []
        self._started_components: list[Component] = []
        self._state = _Lifecycle.NEW
        self.persona_overrides: dict[str, str] = dict(self.config.personas)

        self.store_health = StoreHealth(databases(self._db, self.memory, self.runs, self.inbox))
        features = compose(
            self.config,
            stores=self.stores,
            runner=self.runner,
            runs=self.runs,
            outputs=self.outputs,
            personas=self.personas,
            submit=self.submit,
            resolve=self.resolve_context,
            persona_for=self.persona_for,
            started=lambda: self.started,
            model=lambda: self.model,
            retry_policy=self.retry_policy,
            given_model=model,
            heartbeat=heartbeat,
            redactor=self.redactor,
            health=self.store_health,
            publish_actions=self.registry.replace_actions,
            context_type_of=self.registry.context_type_of,
            model_problems=self.model_problems,
            approver_of=self._approver_of,
        )
        self.features = features
        # questions runs wait on before an action; every answer goes through it (hub/features/_approvals.py)
        self.approvals = features.approvals
        """The approval desk ([`ApprovalDesk`][hub.platform.ApprovalDesk]): a platform passes a person's
        answer with ``hub.approvals.answer(...)``."""
        self.prompts = features.prompts
        self.plugins = features.plugins
        self.components: list[Component] = features.components
        self.metrics = features.metrics
        """The Prometheus metrics ``/metrics`` serves; an extension counts its own on them."""
        self.budgets = features.budgets
        self.background = features.background
        self.revisions = features.revisions
        self.scheduler = features.scheduler
        self.http = features.http
        self.children = features.children
        self.episodes = features.episodes
        self.mcp = features.mcp  # [mcp.*] servers and their tools (hub/mcp), or None
        self.skills = features.skills  # skills/NAME/SKILL.md (hub/personas), or None
        # the platforms' governors take it at start (Governor.report_to): rate limits across workers
        self.outbound_limiter = features.outbound
        deps = EngineDeps(
            config=self.config,
            runs=self.runs,
            inbox=self.inbox,
            memory=self.memory,
            model=ModelAccess(
                get=lambda: self.model,
                is_local=lambda: self.model_is_local,
                retry_policy=self.retry_policy,
                prompts=self.prompts,
                on_error=self.metrics.model_error,
                named=self.named_model,
            ),
            registry=self.registry,
            persona_for=self.persona_for,
            agent=lambda: self.agent,
            limits=self.runner,
            plugins=self.plugins,
            redactor=self.redactor,
            hub=self,
            decoder=features.decoder,
            voice=features.voice,
            media_limits=self.config.media_limits(),
            bus=self.bus,
            skills=self.skills,
        )
        self.engine = Engine(deps)
        # chat commands (/start, /help, /new, /stop and the extensions'), answered by the intake
        guard = features.guard
        self.commands = Commands(
            deps,
            settings=self.config.commands,
            roles_of=guard.roles_of,
            stopper=features.stops,
            # [commands] roles per person: one granted to a linked identity holds on all of them
            person_roles=lambda platform, user: guard.person_roles(People(self.memory), platform, user),
        )
        """The chat commands that are on; a platform lists them with ``hub.commands.menu(...)``."""
        self.stops = features.stops
        # every input's lifecycle: recorded, queued, taken into the engine's runs, resumed
        self.intake = Intake(
            inbox=self.inbox,
            runs=self.runs,
            runner=self.runner,
            engine=self.engine,
            tasks=self.tasks,
            resolve=self.resolve_context,
            redactor=self.redactor,
            park_after=self.config.hub.dead_letter_after,
            # workers sharing PostgreSQL: a conversation runs on one of them at a time, and
            # each keeps its claims on the inbox and takes over a dead one's
            lock=self.stores.lock,
            sweep_every=self.config.store.lease / 3,
            commands=self.commands,
            busy_of=self._busy_of,
        )
        # who may talk to the bot in private (hub/features/_access.py): dm_policy and pairings
        self.access = Access(
            self.stores.pairings,
            redact=self.redactor.redact if self.redactor else None,
            people=People(self.stores.memory),
        )
        """Who may talk to the bot in private: ``await hub.access.check(...)`` gives a
        [`Decision`][hub.Decision] ([`admit_private`][hub.platform.admit_private] asks it)."""
        self.register(self.children.extension())
        if self.config.http is not None and self.config.http.token:  # the dashboard's chat panel
            self.register(web_chat_extension())
        if self.skills is not None:  # load_skill
            self.register(self.skills.extension())
        self.reminders = features.reminders  # [agent] reminders (hub/features/_reminders.py), or None
        if self.reminders is not None:  # set_reminder, list_reminders, cancel_reminder, /reminders
            self.register(self.reminders.extension())
        self.history = features.history  # every run's messages, indexed (hub/features/_history.py)
        if self.config.agent.history_search and self.history is not None:  # search_history
            self.register(self.history.extension())

        # the bot's own context (hub/engine/_agent_context.py), resolved at start once extensions are in
        self.agent: AgentContext | None = None
        if load_extensions:
            for ext in _load_extensions(self.config):
                self.register(ext)
        for ext in extensions:
            self.register(ext)

    # --- registries ---------------------------------------------------------------------

    @functools.cached_property
    def model_is_local(self) -> bool:
        """Whether the model runs in process (decided once; the engine asks every step)."""
        from .models.local import LocalModel

        return isinstance(self.model, LocalModel)

    @property
    def model(self) -> Model:
        """The model runs talk to: the one given, else the one ``[model]`` describes, made on first use."""
        if self._model is None:
            # each named model's requests counted by outcome (hub_model_requests_total)
            self._model = make_model(self.config, observe=self.metrics.model_request)
        return self._model

    def platform_problem(self, platform: str, problem: str | None) -> None:
        """An extension says it stopped working and why (a revoked session), or that it works
        again (None): ``/healthz`` reports the hub ``degraded`` while any is set."""
        if problem:
            self.platform_problems[platform] = problem
        else:
            self.platform_problems.pop(platform, None)

    def model_problems(self) -> dict[str, str]:
        """Named models not answering now, and why (a circuit open, keys refused): what
        ``/healthz`` and the heartbeat report. Empty before the model is first used."""
        return self._model.problems() if self._model is not None else {}

    def _model_names(self) -> list[str]:
        """The names the hub's own model answers under: ``[model]`` and its fallbacks."""
        if self._model is not None and self._given_model:
            return []
        return [PRIMARY_MODEL, *self.config.model.fallbacks]

    def register(self, ext: Extension) -> None:
        """Add an extension's definitions; a name already taken is an ExtensionError naming both."""
        self.registry.register(ext)

    def _busy_of(self, slot: Any) -> str:
        """``busy`` for a conversation: its route's, else its persona's, else ``[agent] busy``."""
        inst = ContextInstance(slot.definition, slot.args, slot.key, extension=self.registry.owner_of(slot.definition))
        route = self.route_for(inst.id)
        if route is not None and route.busy:
            return route.busy
        persona = self.persona_for(inst)
        return persona.busy if persona is not None and persona.busy else self.config.agent.busy

    def _approver_of(self, extension: str | None) -> Approver | None:
        """The platform's own way of asking for an approval (its buttons), if it has one."""
        ext = self.extensions.get(extension) if extension else None
        return ext.approver if ext is not None else None

    def owner_of(self, item: Any) -> str | None:
        """The name of the extension that registered ``item``."""
        return self.registry.owner_of(item)

    def route_for(self, conversation: str) -> RouteSection | None:
        """The ``[[routes]]`` table a conversation's name matches first (None: no route):
        its persona, model and allowed actions."""
        return self.config.route_for(conversation)

    def named_model(self, name: str) -> Model:
        """The ``[models.NAME]`` model ``name`` (a route's), made on first use and closed on stop."""
        model = self._named_models.get(name)
        if model is None:
            model = self._named_models[name] = make_model(self.config, name=name, observe=self.metrics.model_request)
        return model

    def persona_for(self, inst: Conversation) -> Persona | None:
        """The persona a conversation speaks with: its ``[[routes]]``'s, else ``[personas]``'s
        for the instance, its type or its extension, else its context's own; None: the default."""
        o = self.persona_overrides
        route = self.config.route_for(inst.id)
        override = (
            (route.persona if route is not None else "")
            or o.get(inst.id)
            or o.get(inst.type)
            or (o.get(inst.extension) if inst.extension else None)
            or inst.definition.persona
        )
        return self.personas.for_context(inst.type, inst.id, inst.extension, override=override)

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """True from the end of [`start()`][hub.Hub.start] to the beginning of [`stop()`][hub.Hub.stop]:
        input is taken."""
        return self._state == _Lifecycle.STARTED

    async def start(self) -> Hub:
        """Open the stores, install the extensions, start their services and the hub's
        components, resume the inputs left unanswered, then take input. A failure stops
        whatever had started, and is raised."""
        if self._state in (_Lifecycle.STARTED, _Lifecycle.STARTING):
            return self
        if self._state in (_Lifecycle.STOPPING, _Lifecycle.STOPPED):
            raise RunError("a stopped hub cannot start again; create a new Hub")
        self._state = _Lifecycle.STARTING
        try:
            self._check_routes()
            self.commands.check()
            await self.stores.open()
            await finish_forgetting(self.stores)  # a `hub memory forget --person` cut off, before any input
            for err in self.personas.load_all():
                log.error("%s", err)
            killed = await self.intake.recover()
            for ext in self.extensions.values():
                await self._install(ext)
            self.agent = AgentContext.resolve(self.config, self.contexts, self.extensions, self.memory, self.owner_of)
            self.metrics.declare(
                context_types=self.contexts,
                output_types=self.outputs,
                schedules=self.config.schedules,
                models=self._model_names(),
            )
            if self.agent is not None:  # loaded now: a broken `load` fails the start, not a user's run
                await self.agent.start(self)
            await self._start_services()
            for comp in self.components:
                await comp.start(self)
                self._started_components.append(comp)
            self.intake.start_sweeping()
            await self.intake.resume(killed)
            await self._subscribe_inputs()
        except BaseException:
            self._state = _Lifecycle.STARTED
            await self.stop()
            raise
        self._state = _Lifecycle.STARTED
        return self

    def _check_routes(self) -> None:
        """Extensions' routes need the ``[http]`` endpoint."""
        if self.routes and self.http is None:
            owners = sorted({f"{self.owner_of(r)} ({path})" for path, r in self.routes.items()})
            raise ConfigError(
                f"extension routes need the [http] endpoint, which is not configured: {', '.join(owners)}",
                path=str(self.config.path) if self.config.path else None,
                key="http",
            )

    async def _install(self, ext: Extension) -> None:
        try:
            for fn in (ext.install, *(o.install for o in ext.outputs), *(i.install for i in ext.inputs)):
                if fn is not None:
                    res = fn(self)
                    if asyncio.iscoroutine(res):
                        await res
        except Exception as e:
            raise ExtensionFailed(ext.name, e) from e

    async def _start_services(self) -> None:
        for ext in self.extensions.values():
            for svc in ext.services:
                try:
                    await svc.start(self)
                except Exception as e:
                    raise ExtensionFailed(ext.name, e) from e
                self._started_services.append(svc)

    async def _subscribe_inputs(self) -> None:
        """Last: the inputs that are enabled start sending (the hub takes input from here)."""
        for ext in self.extensions.values():
            for inp in ext.inputs:
                if inp.enabled is not None and not inp.enabled(self):
                    continue
                try:
                    stop = await inp.subscribe(self._sender(inp), self)
                except Exception as e:
                    raise ExtensionFailed(ext.name, e) from e
                self._stops.append(stop)

    async def stop(self) -> None:
        """Stop taking input and stop everything [`start`][hub.Hub.start] started, in the reverse
        order: the inputs, then the runs in flight (given ``[hub] shutdown_grace`` to end), the
        components, the services, the models and the stores. Errors in one part are logged and
        the rest still stop. Idempotent; a stopped hub does not start again."""
        if self._state in (_Lifecycle.NEW, _Lifecycle.STOPPED, _Lifecycle.STOPPING):
            self._state = _Lifecycle.STOPPED if self._state == _Lifecycle.NEW else self._state
            return
        self._state = _Lifecycle.STOPPING
        for stop in reversed(self._stops):
            try:
                await stop()
            except Exception:
                log.exception("an input failed to stop")
        self._stops.clear()
        await self.runner.stop(self.config.hub.shutdown_grace)
        await self.tasks.close()  # the runs still going end as a shutdown, with every other task
        for comp in reversed(self._started_components):
            try:
                await comp.stop()
            except Exception:
                log.exception("%s failed to stop", type(comp).__name__)
        self._started_components.clear()
        for svc in reversed(self._started_services):
            try:
                await svc.stop()
            except Exception:
                log.exception("service %s failed to stop", svc.name)
        self._started_services.clear()
        for m in (self._model, *self._named_models.values()):
            if m is None:
                continue
            try:
                await m.close()
            except Exception:
                log.exception("model failed to close")
        self._named_models.clear()
        await self.stores.close()
        if self.outbound_limiter is not None:
            await self.outbound_limiter.close()
        self.bus.close()
        self._state = _Lifecycle.STOPPED

    def events(
        self,
        *,
        context: str | None = None,
        run: str | None = None,
        kinds: Iterable[str] | None = None,
        maxsize: int = 1000,
        batch: float = 0.01,
    ) -> EventStream:
        """Follow runs' events as they happen (hub/events.py); filtered by context, run and kind.
        A subscriber that falls ``maxsize`` events behind loses events, reported as ``Dropped``;
        a waiting one is woken at most every ``batch`` seconds, for all that came meanwhile."""
        return self.bus.subscribe(context=context, run=run, kinds=kinds, maxsize=maxsize, batch=batch)

    async def __aenter__(self) -> Hub:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- what extensions use -------------------------------------------------------------

    def create_task(self, coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
        """Run ``coro`` in the background, owned by the hub (as PTB's ``Application.create_task``).

        The task is tracked: an error it raises is logged, and it is cancelled and awaited
        when the hub stops. Use it for listeners, pollers and typing indicators, never a bare
        ``asyncio.create_task``.
        """
        return self.tasks.create(coro, name=name)

    def lease(self, name: str, *, ttl: float = 30.0, retry: float | None = None) -> LeaseKeeper:
        """A keeper of the lease ``name`` for this worker (see `hub.store`): run a
        listener that must be unique across workers with ``hub.create_task(keeper.hold(work),
        name=...)``; it runs only while this worker holds the lease. ``ttl``: how long a dead
        worker's lease keeps others waiting."""
        return LeaseKeeper(self.leases, name, self.worker, ttl=ttl, retry=retry)

    async def received(self, platform_id: str) -> bool:
        """Whether an input with this platform id was already recorded (a redelivery, a replay)."""
        return await self.intake.received(platform_id)

    # --- sending ------------------------------------------------------------------------

    def resolve_context(self, context: str | Context, args: Any = None) -> tuple[Context, Any, str]:
        """A context type (with args) or a ``TYPE:KEY`` instance name → (definition, args, key)."""
        return self.registry.resolve(context, args)

    async def submit(
        self,
        context: str | Context,
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
    ) -> Submission:
        """Record an input and queue it; returns at once (see [`send()`][hub.Hub.send] to wait).
        ``formatted`` is how the log shows it (an input's ``format``); ``media``: the
        pictures and files that came with it, as references (fetched when a run needs them);
        ``command``: the chat command it is (a platform parsed ``/name args``), answered
        without the model when that command is on (`commands`), else it is text."""
        if self._state != _Lifecycle.STARTED:
            raise RunError("the hub is not started (use `async with Hub(...)` or await hub.start())")
        definition, parsed, key = self.resolve_context(context, args)
        return await self.intake.submit(
            definition,
            parsed,
            key,
            data,
            type=type,
            user=user,
            platform_id=platform_id,
            meta=meta,
            parent_id=parent_id,
            formatted=formatted,
            media=media,
            command=command,
        )

    async def stop_run(self, run_id: str, *, reason: str = STOPPED_BY_OPERATOR, wait: float = 5.0) -> RunRecord:
        """Stop the run ``run_id`` (an id or a unique prefix) in progress, on whichever worker
        holds it: it ends ``killed`` with ``reason``. Waits up to ``wait`` seconds for the end;
        the run's record then.

        Raises:
            RunError: no such run, or it is not running.
        """
        return await self.stops.stop_run(run_id, reason, wait=wait)

    async def send(
        self,
        context: str | Context,
        args: Any = None,
        data: Any = None,
        **kw: Any,
    ) -> RunResult | None:
        """Send an input and wait for the run that handles it: its terminal state and logs.

        Returns None for a redelivered ``platform_id`` (already handled, not answered again).
        """
        sub = await self.submit(context, args, data, **kw)
        if sub.duplicate:
            return None
        return await sub.wait()

    def _sender(self, inp: Input) -> Callable[..., Awaitable[Any]]:
        async def send(context: str | Context, args: Any = None, data: Any = None, **kw: Any) -> Submission:
            kw.setdefault("type", inp.type)
            try:  # the input's schema: a mismatch is the extension's bug, told to its author
                data = inp.validate(data)
            except ValidationError as e:
                owner = self.owner_of(inp) or inp.type
                raise ExtensionError(
                    owner, f"input {inp.type!r} sent data that does not match its schema: {validation_message(e)}"
                ) from e
            if inp.format is not None:
                try:
                    kw["formatted"] = str(inp.format(data))
                except Exception as e:
                    raise ExtensionError(
                        self.owner_of(inp) or inp.type,
                        f"input {inp.type!r}: its format failed: {type(e).__name__}: {e}",
                    ) from e
            return await self.submit(context, args, data, **kw)

        return send

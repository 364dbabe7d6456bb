"""The :class:`Hub`: registries, stores, the runner and the engine, with an explicit lifecycle.

Use it as an async context manager (``async with Hub(config) as hub``); ``start`` and
``stop`` are idempotent. Everything a hub holds lives on the instance: two hubs in one
process share nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ValidationError

from .config import HubConfig
from .db import Database
from .definitions import Action, Context, Extension, Input, Output
from .children import ChildRuns
from .engine import ContextInstance, Engine, RunContext, RunResult
from .episodes import EpisodicMemory
from .errors import ExtensionError, ExtensionFailed, RunError
from .inbox import InboxStore, SQLiteInbox
from .http import http_component
from .logs import InputLog, OutputLog, StepLog
from .memory.sqlite import SQLiteMemoryStore
from .memory.store import MemoryStore
from .metrics import Metrics
from .models import Model, RetryPolicy
from .persona import Persona, PersonaSet
from .prompt import PromptBuilder
from .runner import Runner, Submission
from .runs import RunStore, SQLiteRunStore
from .schedule import Scheduler, SQLiteScheduleStore

if TYPE_CHECKING:
    from .runner import Slot

__all__ = ["Hub", "Component", "make_model"]

log = logging.getLogger(__name__)


class _Lifecycle(Enum):
    NEW = "new"
    STARTING = "starting"
    STARTED = "started"
    STOPPING = "stopping"
    STOPPED = "stopped"


def make_model(config: HubConfig) -> Model:
    """The model the config asks for: an OpenAI-compatible server, or a local GGUF model."""
    m = config.model
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
        api_key=m.api_key or None,
        timeout=m.timeout,
        temperature=m.temperature,
        max_tokens=m.max_tokens,
        concurrency=m.concurrency,
    )


class Component(Protocol):
    """A built-in part with a lifecycle, owned by the hub."""

    async def start(self, hub: Hub) -> None: ...

    async def stop(self) -> None: ...


class Hub:
    """One agent hub. Give it a config, and optionally replacements for any seam."""

    def __init__(
        self,
        config: HubConfig | None = None,
        *,
        model: Model | None = None,
        memory: MemoryStore | None = None,
        runs: RunStore | None = None,
        inbox: InboxStore | None = None,
        extensions: Sequence[Extension] = (),
        load_extensions: bool = True,
        personas: PersonaSet | None = None,
    ) -> None:
        self.config = config or HubConfig()
        self._db: Database | None = None
        needs_db = memory is None or runs is None or inbox is None
        if needs_db:
            self._db = Database(self.config.data_dir / "hub.db")
        self.memory: MemoryStore = memory or SQLiteMemoryStore(self._db)  # type: ignore[arg-type]
        self.runs: RunStore = runs or SQLiteRunStore(self._db)  # type: ignore[arg-type]
        self.inbox: InboxStore = inbox or SQLiteInbox(self._db)  # type: ignore[arg-type]
        self._model = model
        self.personas = personas or PersonaSet(self.config.contexts_dir, interval=1.0)
        m = self.config.model
        budget = self.config.agent.prompt_budget
        if m.resolved_provider() == "local" and model is None:
            budget = min(budget, m.context_length - (m.max_tokens or 192) - 64)  # fit the local context window
        self.prompts = PromptBuilder(budget=budget)
        self.prompt_style = m.prompt_style
        self.retry_policy = RetryPolicy(m.max_retries, m.retry_base_delay, m.retry_max_delay)
        self.runner = Runner(self, concurrency=m.concurrency)
        self.engine = Engine(self)

        self.extensions: dict[str, Extension] = {}
        self.contexts: dict[str, Context] = {}
        self.actions: dict[str, Action] = {}
        self.outputs: dict[str, Output] = {}
        self.inputs: dict[str, Input] = {}
        self._owners: dict[int, str] = {}
        self._stops: list[Callable[[], Awaitable[None]]] = []
        self._started_services: list[Any] = []
        self._started_components: list[Component] = []
        self._state = _Lifecycle.NEW

        # extension points for the rest of the hub (episodes, limits, guardrails, metrics)
        self.before_run_hooks: list[Callable[[RunContext, Slot], Awaitable[None]]] = []
        self.after_run_hooks: list[Callable[[RunResult, RunContext | None], Awaitable[None]]] = []
        self.guards: list[Callable[[Action, RunContext], Awaitable[str | None]]] = []
        self.limit_checks: list[Callable[[RunContext], str | None]] = []
        self.step_observers: list[Callable[[RunContext, StepLog], None]] = []
        self.output_observers: list[Callable[[RunContext, OutputLog], None]] = []
        self.persona_overrides: dict[str, str] = dict(self.config.personas)
        # built-in parts with a lifecycle (HTTP endpoint, scheduler, episodic memory, ...):
        # started after extensions' services, stopped before them
        self.components: list[Component] = []
        # operator features (hub/ops.py): redaction, persona revisions, role guard, budgets
        from .ops import Operations

        self.ops = Operations(self, self._db)

        # triggers beyond chat and the metrics they report (hub/schedule.py, http.py, children.py)
        self.metrics = Metrics(self)
        self.scheduler = Scheduler(SQLiteScheduleStore(self._db) if self._db is not None else None)
        self.components.append(self.scheduler)
        self.http = http_component(self.config)
        if self.http is not None:
            self.components.append(self.http)
        self.children = ChildRuns(self)
        self.register(self.children.extension())

        # episodic memory (hub/episodes.py): episodes after runs, recall before them
        self.episodes: EpisodicMemory | None = None
        if self.config.memory.episodes:
            self.episodes = EpisodicMemory.attach(self)

        if load_extensions:
            from .loader import load_extensions as _load

            for ext in _load(self.config):
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
        if self._model is None:
            self._model = make_model(self.config)
        return self._model

    def register(self, ext: Extension) -> None:
        """Add an extension's definitions; a name already taken is an ExtensionError naming both."""
        if ext.name in self.extensions:
            raise ExtensionError(ext.name, "registered twice")
        for registry, items, attr, what in (
            (self.contexts, ext.contexts, "type", "context"),
            (self.actions, ext.actions, "name", "action"),
            (self.outputs, ext.outputs, "type", "output"),
            (self.inputs, ext.inputs, "type", "input"),
        ):
            for item in items:
                name = getattr(item, attr)
                if name in registry:
                    other = self._owners.get(id(registry[name]), "?")
                    raise ExtensionError(ext.name, f"{what} {name!r} is already defined by extension {other!r}")
        for registry, items, attr in (
            (self.contexts, ext.contexts, "type"),
            (self.actions, ext.actions, "name"),
            (self.outputs, ext.outputs, "type"),
            (self.inputs, ext.inputs, "type"),
        ):
            for item in items:
                registry[getattr(item, attr)] = item
                self._owners[id(item)] = ext.name
        self.extensions[ext.name] = ext

    def owner_of(self, item: Any) -> str | None:
        return self._owners.get(id(item))

    def persona_for(self, inst: ContextInstance) -> Persona | None:
        o = self.persona_overrides
        override = o.get(inst.id) or o.get(inst.type) or (o.get(inst.extension) if inst.extension else None) or inst.definition.persona
        return self.personas.for_context(inst.type, inst.id, inst.extension, override=override)

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """True from the end of :meth:`start` to the beginning of :meth:`stop`: input is taken."""
        return self._state == _Lifecycle.STARTED

    async def start(self) -> Hub:
        if self._state in (_Lifecycle.STARTED, _Lifecycle.STARTING):
            return self
        if self._state in (_Lifecycle.STOPPING, _Lifecycle.STOPPED):
            raise RunError("a stopped hub cannot start again; create a new Hub")
        self._state = _Lifecycle.STARTING
        try:
            for store in (self.memory, self.runs, self.inbox, *self.ops.stores):
                await store.open()
            for err in self.personas.load_all():
                log.error("%s", err)
            killed = await self.runs.recover()
            for run in killed:
                log.warning("run %s of %s was cut off by a crash: killed (abnormal_exit)", run.id[:8], run.context)
            for ext in self.extensions.values():
                await self._install(ext)
            for ext in self.extensions.values():
                for svc in ext.services:
                    try:
                        await svc.start(self)
                    except Exception as e:
                        raise ExtensionFailed(ext.name, e) from e
                    self._started_services.append(svc)
            for comp in self.components:
                await comp.start(self)
                self._started_components.append(comp)
            await self._requeue({r.id for r in killed})
            for ext in self.extensions.values():
                for inp in ext.inputs:
                    if inp.enabled is not None and not inp.enabled(self):
                        continue
                    try:
                        stop = await inp.subscribe(self._sender(inp), self)
                    except Exception as e:
                        raise ExtensionFailed(ext.name, e) from e
                    self._stops.append(stop)
        except BaseException:
            self._state = _Lifecycle.STARTED
            await self.stop()
            raise
        self._state = _Lifecycle.STARTED
        return self

    async def _install(self, ext: Extension) -> None:
        try:
            for fn in (ext.install, *(o.install for o in ext.outputs), *(i.install for i in ext.inputs)):
                if fn is not None:
                    res = fn(self)
                    if asyncio.iscoroutine(res):
                        await res
        except Exception as e:
            raise ExtensionFailed(ext.name, e) from e

    async def _requeue(self, killed: set[str]) -> None:
        """Inputs recorded but not handled before the last stop: handle them now, once."""
        pending = await self.inbox.pending()
        answered: dict[str, bool] = {}
        for p in pending:
            if p.run_id is not None and p.run_id in killed:
                if p.run_id not in answered:
                    events = await self.runs.events(p.run_id)
                    answered[p.run_id] = any(isinstance(e, OutputLog) and e.sent for e in events)
                if answered[p.run_id]:
                    await self.inbox.done([p.entry.id])
                    continue
            try:
                definition, args, key = self.resolve_context(p.context)
            except RunError as e:
                log.error("inbox: cannot resume input %s for %s: %s", p.entry.id[:8], p.context, e)
                continue
            log.info("inbox: resuming input %s for %s", p.entry.id[:8], p.context)
            p.entry.processed = False
            self.runner.submit(definition, args, key, p.entry)

    async def stop(self) -> None:
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
        if self._model is not None:
            try:
                await self._model.close()
            except Exception:
                log.exception("model failed to close")
        for store in (*self.ops.stores, self.inbox, self.runs, self.memory):
            await store.close()
        if self._db is not None:
            await self._db.close()
        self._state = _Lifecycle.STOPPED

    async def __aenter__(self) -> Hub:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- sending ------------------------------------------------------------------------

    def resolve_context(self, context: str | Context, args: Any = None) -> tuple[Context, Any, str]:
        """A context type (with args) or a ``TYPE:KEY`` instance name → (definition, args, key)."""
        if isinstance(context, Context):
            definition = context
            key = None
        elif context in self.contexts:
            definition, key = self.contexts[context], None
        else:
            ctype, sep, key = context.rpartition(":")
            if not sep or ctype not in self.contexts:
                known = ", ".join(sorted(self.contexts)) or "none"
                raise RunError(f"unknown context {context!r}; known context types: {known}")
            definition = self.contexts[ctype]
        try:
            if args is None:
                if key is None:
                    raise RunError(f"context {definition.type!r} needs args (or name an instance as TYPE:KEY)")
                parsed = definition.args_from_key(key)
            elif isinstance(args, BaseModel):
                parsed = args
            else:
                parsed = definition.schema.model_validate(args)
        except (ValidationError, ValueError) as e:
            raise RunError(f"invalid args for context {definition.type!r}: {e}") from e
        return definition, parsed, definition.key_of(parsed)

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
    ) -> Submission:
        """Record an input and queue it; returns at once (see :meth:`send` to wait)."""
        if self._state != _Lifecycle.STARTED:
            raise RunError("the hub is not started (use `async with Hub(...)` or await hub.start())")
        definition, parsed, key = self.resolve_context(context, args)
        entry = InputLog(type=type, content=data, user=user, platform_id=platform_id, meta=dict(meta or {}))
        if parent_id:
            entry.meta["parent_run"] = parent_id
        if not await self.inbox.record(f"{definition.type}:{key}", entry):
            log.info("input %s for %s:%s already recorded: not answered again", platform_id, definition.type, key)
            sub = Submission(None, f"{definition.type}:{key}", duplicate=True)
            sub.result.cancel()
            return sub
        return self.runner.submit(definition, parsed, key, entry, parent_id=parent_id)

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
            return await self.submit(context, args, data, **kw)

        return send

    # --- hooks the engine calls ---------------------------------------------------------

    async def before_run(self, ctx: RunContext, slot: Slot) -> None:
        for hook in self.before_run_hooks:
            await hook(ctx, slot)

    async def after_run(self, result: RunResult, ctx: RunContext | None) -> None:
        for hook in self.after_run_hooks:
            try:
                await hook(result, ctx)
            except Exception:
                log.exception("after-run hook %r failed for run %s", hook, result.run_id)

    async def authorize(self, action: Action, ctx: RunContext) -> str | None:
        """None to allow, or the reason of a denial (which the model sees)."""
        for guard in self.guards:
            denial = await guard(action, ctx)
            if denial:
                return denial
        return None

    def check_limits(self, ctx: RunContext) -> str | None:
        for check in self.limit_checks:
            reason = check(ctx)
            if reason:
                return reason
        return None

    def observe_step(self, ctx: RunContext, step: StepLog) -> None:
        for fn in self.step_observers:
            fn(ctx, step)

    def observe_output(self, ctx: RunContext, out: OutputLog) -> None:
        for fn in self.output_observers:
            fn(ctx, out)




"""The step loop: prepare, prompt, stream, act on each element as it closes, loop, finish.

One :class:`Engine` per hub. :meth:`Engine.run` drives one run of one context instance;
the :class:`~hub.runner.Runner` guarantees at most one run per instance at a time and hands
the run the inputs that arrive meanwhile, which it takes at its next step boundary.

An element is handled when its closing tag arrives: thoughts are logged, action calls are
validated and started (concurrently, unless they share a queue), outputs are validated and
sent in order by a per-run chain of tasks, so an output reaches the platform before the
model has finished its response.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from .definitions import Action, Context, Output
from .errors import ActionError, HubError, ModelError, RetryAction
from .logconf import context_id_var, run_id_var
from .logs import (
    ActionCallLog,
    ActionResultLog,
    ErrorLog,
    InputLog,
    Log,
    OutputLog,
    StateLog,
    StepLog,
    ThoughtLog,
    from_dict,
    to_dict,
)
from .models import RetryPolicy, Usage, stream_with_retry
from .parser import Element, ElementParser
from .prompt import PromptParts
from .runs import RunRecord, RunState

if TYPE_CHECKING:
    from .hub import Hub
    from .runner import Slot

__all__ = ["Engine", "RunContext", "RunResult", "ContextInstance", "RunRejected", "StopRun"]

log = logging.getLogger(__name__)

THOUGHT_TAGS = frozenset({"reasoning", "think", "thinking"})
_TEMPLATE = re.compile(r"^\{\{\s*calls\[(\d+)\]((?:\.[A-Za-z_][\w-]*|\[\d+\])*)\s*\}\}$")
_PATH_PART = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]")


class RunRejected(HubError):
    """A guardrail denied something essential: the run ends ``rejected``."""


class _Stop(Exception):
    """Ends a run early with a terminal state (a limit, a rejection)."""

    def __init__(self, state: RunState, reason: str) -> None:
        self.state = state
        self.reason = reason
        super().__init__(reason)


StopRun = _Stop
"""Public name for hooks: raise ``StopRun(RunState.KILLED, reason)`` in a before-run hook
to end the run before its first step (a spent budget)."""


@dataclass(slots=True)
class ContextInstance:
    """One conversation: a context definition, its args and key, its memory and history."""

    definition: Context
    args: Any
    key: str
    memory: Any = None
    history: list[Log] = field(default_factory=list)
    extension: str | None = None
    used: list[ContextInstance] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.definition.type}:{self.key}"

    @property
    def type(self) -> str:
        return self.definition.type


class RunContext:
    """What handlers and hooks get: the hub, the run, the conversation and the call."""

    __slots__ = (
        "hub", "run", "context", "inputs", "call", "attributes", "action_memory", "logs", "progress",
        "episodes", "_stop",
    )

    def __init__(self, hub: Hub, run: RunRecord, context: ContextInstance, logs: list[Log]) -> None:
        self.hub = hub
        self.run = run
        self.context = context
        self.logs = logs
        self.inputs: list[InputLog] = []
        self.call: ActionCallLog | None = None
        self.attributes: BaseModel | None = None
        self.action_memory: Any = None
        self.progress: Callable[[], None] = _no_progress
        """Tell the heartbeat this run is alive (an action waiting on something long)."""
        self.episodes: list[str] = []
        """Recalled episodes, rendered, that the prompt shows (filled by a ``before_run`` hook)."""
        self._stop: Callable[[RunState, str], None] | None = None

    def stop(self, state: RunState, reason: str) -> None:
        """End this run from outside its step loop (another run, a plugin) in ``state``."""
        if self._stop is not None:
            self._stop(state, reason)

    @property
    def memory(self) -> Any:
        """The conversation's persistent memory (saved when the run ends)."""
        return self.context.memory

    @memory.setter
    def memory(self, value: Any) -> None:
        self.context.memory = value

    @property
    def user(self) -> str | None:
        return self.run.user

    def derive(self, **changes: Any) -> RunContext:
        ctx = RunContext(self.hub, self.run, self.context, self.logs)
        ctx.inputs = self.inputs
        ctx.progress = self.progress
        ctx.episodes = self.episodes
        ctx._stop = self._stop
        for k, v in changes.items():
            setattr(ctx, k, v)
        return ctx


def _no_progress() -> None:
    pass


@dataclass(slots=True)
class RunResult:
    """What :meth:`Hub.send` returns: the terminal state and the whole chain of logs."""

    run_id: str
    context: str
    state: RunState
    reason: str | None
    logs: list[Log]
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.state == RunState.COMPLETED

    @property
    def outputs(self) -> list[OutputLog]:
        return [e for e in self.logs if isinstance(e, OutputLog)]

    @property
    def text(self) -> str:
        """The text of the outputs that were sent, joined by blank lines."""
        return "\n\n".join(str(o.content) for o in self.outputs if o.sent)


@dataclass(slots=True)
class _Call:
    log: ActionCallLog
    done: asyncio.Future[Any]
    task: asyncio.Task[None] | None = None


@dataclass(slots=True)
class _RunState:
    run: RunRecord
    ctx: RunContext
    instance: ContextInstance
    slot: Slot
    logs: list[Log]
    actions: dict[str, Action]
    outputs: dict[str, Output]
    progress: Callable[[], None]
    step: int = 0
    feedback: bool = False
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    output_chain: asyncio.Task[None] | None = None
    input_ids: list[str] = field(default_factory=list)


class Engine:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    # --- preparing ----------------------------------------------------------------------

    async def prepare(self, definition: Context, args: Any, key: str, run: RunRecord, logs: list[Log]) -> ContextInstance:
        inst = ContextInstance(definition=definition, args=args, key=key, extension=self.hub.owner_of(definition))
        ctx = RunContext(self.hub, run, inst, logs)
        store = self.hub.memory
        if definition.load is not None:
            inst.memory = await definition.load(inst.id, ctx)
        else:
            inst.memory = await store.get(f"memory:{inst.id}")
        if inst.memory is None:
            inst.memory = definition.create(args, ctx) if definition.create is not None else {}
            if asyncio.iscoroutine(inst.memory):
                inst.memory = await inst.memory
        raw = await store.get(f"working-memory:{inst.id}") or []
        inst.history = [from_dict(d) for d in raw if isinstance(d, dict)]
        if definition.use is not None:
            for sub_def, sub_args in definition.use(args, ctx):
                sub_args = sub_def.schema.model_validate(sub_args) if not isinstance(sub_args, BaseModel) else sub_args
                sub = ContextInstance(sub_def, sub_args, sub_def.key_of(sub_args), extension=self.hub.owner_of(sub_def))
                sub.memory = await store.get(f"memory:{sub.id}")
                if sub.memory is None:
                    sub.memory = sub_def.create(sub_args, ctx) if sub_def.create else {}
                inst.used.append(sub)
        return inst

    async def save(self, inst: ContextInstance, run_logs: list[Log], ctx: RunContext) -> None:
        store = self.hub.memory
        definition = inst.definition
        # The writes are independent: issued together they share one SQLite group commit
        # (four sequential commits cost ~0.4 ms of CPU per run, one ~0.12 ms).
        writes = []
        if definition.save is not None:
            await definition.save(inst.id, inst.memory, ctx)
        else:
            writes.append(store.set(f"memory:{inst.id}", inst.memory))
        for sub in inst.used:
            writes.append(store.set(f"memory:{sub.id}", sub.memory))
        keep = definition.max_history if definition.max_history is not None else self.hub.config.agent.max_history
        kept = [e for e in run_logs if isinstance(e, (InputLog, OutputLog, ActionCallLog, ActionResultLog))]
        history = (inst.history + kept)[-keep:] if keep else []
        writes.append(store.set(f"working-memory:{inst.id}", [to_dict(e) for e in history]))
        writes.append(store.set(
            f"context:{inst.id}",
            {"type": inst.type, "key": inst.key, "args": _jsonable(inst.args), "updated": time.time()},
        ))
        await asyncio.gather(*writes)

    def _available(self, st: _RunState) -> None:
        inst, ctx = st.instance, st.ctx
        types = {inst.type, *(u.type for u in inst.used)}
        actions: dict[str, Action] = {}
        for a in (*self.hub.actions.values(), *inst.definition.actions, *(a for u in inst.used for a in u.definition.actions)):
            if a.enabled is None or a.enabled(ctx):
                actions[a.name] = a
        outputs: dict[str, Output] = {}
        for o in (*self.hub.outputs.values(), *inst.definition.outputs, *(o for u in inst.used for o in u.definition.outputs)):
            if (o.context is None or o.context in types) and (o.enabled is None or o.enabled(ctx)):
                outputs[o.type] = o
        st.actions, st.outputs = actions, outputs

    def _parts(self, st: _RunState) -> PromptParts:
        inst = st.instance
        persona = self.hub.persona_for(inst)
        state_lines = []
        for i in (inst, *inst.used):
            d = i.definition
            if d.render is not None:
                state_lines.append(str(d.render(i.memory, st.ctx)))
            elif i.memory:
                state_lines.append(f'<memory of="{i.type}">{_escape_json(i.memory)}</memory>')
        return PromptParts(
            persona_name=persona.name if persona else "a helpful assistant",
            persona_instructions=persona.instructions if persona else "",
            persona_examples=tuple(persona.examples) if persona else (),
            context_id=inst.id,
            context_type=inst.type,
            context_instructions=[d.instructions for d in (inst.definition, *(u.definition for u in inst.used))],
            context_state=state_lines,
            actions=list(st.actions.values()),
            outputs=list(st.outputs.values()),
            reply_output=inst.definition.reply_output,
            history=inst.history,
            run=st.logs,
            episodes=st.ctx.episodes,
        )

    # --- the run ------------------------------------------------------------------------

    async def run(self, slot: Slot) -> RunResult:
        hub = self.hub
        cfg = hub.config.agent
        first = slot.peek()
        run = RunRecord(context=slot.id, parent_id=slot.parent_of(first), user=first.user if first else None)
        logs: list[Log] = []
        await hub.runs.create(run)
        run_id_var.set(run.id)
        context_id_var.set(slot.id)
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + cfg.run_timeout
        last_beat = started
        beat_every = min(0.5, cfg.heartbeat_timeout / 4)  # rescheduling the timer on every chunk costs
        st: _RunState | None = None
        state, reason = RunState.COMPLETED, None
        try:
            async with asyncio.timeout_at(min(deadline, started + cfg.heartbeat_timeout)) as timer:

                def progress() -> None:
                    nonlocal last_beat
                    now = loop.time()
                    if now - last_beat > beat_every:
                        last_beat = now
                        timer.reschedule(min(deadline, now + cfg.heartbeat_timeout))

                inst = await self.prepare(slot.definition, slot.args, slot.key, run, logs)
                ctx = RunContext(hub, run, inst, logs)
                ctx.progress = progress
                ctx._stop = lambda state, reason: slot.stop_with(_Stop(state, reason))
                st = _RunState(run, ctx, inst, slot, logs, {}, {}, progress)
                self._take_inputs(st)
                await hub.before_run(st.ctx, slot)
                state, reason = await self._loop(st)
        except _Stop as e:
            state, reason = e.state, e.reason
        except TimeoutError:
            state = RunState.KILLED
            reason = "timeout" if loop.time() >= deadline - 0.01 else "stalled"
        except asyncio.CancelledError:
            stop = slot.stop_exc
            task = asyncio.current_task()
            if stop is None or task is None:
                await self._finish(st, run, logs, RunState.KILLED, slot.cancel_reason or "cancelled", slot)
                raise
            task.uncancel()  # our own stop (a critical denial), not a cancellation from outside
            state, reason = stop.state, stop.reason
        except ModelError as e:
            state, reason = RunState.FAILED, str(e)
        except Exception as e:  # a bug or a failing hook: recorded, never swallowed silently
            log.exception("run %s of %s failed", run.id, slot.id)
            state, reason = RunState.FAILED, f"internal error: {type(e).__name__}: {e}"
        return await self._finish(st, run, logs, state, reason, slot)

    def _append(self, st: _RunState, entry: Log) -> None:
        st.logs.append(entry)
        self.hub.runs.append(st.run, entry)

    def _take_inputs(self, st: _RunState) -> int:
        taken = st.slot.take(st.run.id)
        for entry in taken:
            self._append(st, entry)
            st.input_ids.append(entry.id)
        if taken:
            st.ctx.inputs = [*st.ctx.inputs, *taken]
            self.hub.inbox.take([e.id for e in taken], st.run.id)
        return len(taken)

    async def _loop(self, st: _RunState) -> tuple[RunState, str | None]:
        cfg = self.hub.config.agent
        max_steps = st.instance.definition.max_steps or cfg.max_steps
        while True:
            if st.step >= max_steps:
                return RunState.KILLED, f"max_steps ({max_steps})"
            st.step += 1
            st.run.steps = st.step
            st.feedback = False
            self._available(st)
            await self._hook(st.instance.definition.on_step, st.ctx)
            await self._step(st)
            self.hub.runs.update(st.run)
            if cfg.max_run_tokens and st.run.tokens > cfg.max_run_tokens:
                return RunState.KILLED, f"max_tokens ({cfg.max_run_tokens})"
            limit = self.hub.check_limits(st.ctx)
            if limit:
                return RunState.KILLED, limit
            new_inputs = self._take_inputs(st)
            unprocessed = any(isinstance(e, ActionResultLog) and not e.processed for e in st.logs)
            if not (unprocessed or new_inputs or st.feedback):
                return RunState.COMPLETED, None

    async def _step(self, st: _RunState) -> None:
        hub = self.hub
        started = time.monotonic()
        parts = self._parts(st)
        chat_style = hub.prompt_style == "chat" or (hub.prompt_style == "auto" and hub.model_is_local and not st.actions)
        request = hub.prompts.build_chat(parts) if chat_style else hub.prompts.build(parts)
        for e in st.logs:  # what this prompt shows is seen from now on
            if isinstance(e, (InputLog, ActionResultLog)):
                e.processed = True
        parser = ElementParser()
        calls: list[_Call] = []
        step_log = StepLog(step=st.step)
        policy = hub.retry_policy
        attempts = 0
        while True:
            try:
                async with hub.runner.llm_slot():
                    first_at = None
                    async for chunk in stream_with_retry(hub.model, request, policy, on_retry=self._on_retry(st)):
                        if isinstance(chunk, Usage):
                            step_log.prompt_tokens = chunk.prompt_tokens
                            step_log.completion_tokens = chunk.completion_tokens
                            continue
                        if first_at is None:
                            first_at = time.monotonic()
                            step_log.llm_latency = first_at - started
                        st.progress()
                        for el in parser.feed(chunk):
                            self._element(st, el, calls)
                break
            except ModelError as e:
                handled = parser.saw_tags or calls
                decision = await self._on_error(st, e)
                if handled:
                    # chunks were already acted on: keep them, note the break, go on
                    self._append(st, ErrorLog(message=f"model stream broke: {e}", where="model", step=st.step))
                    break
                if decision == "retry" and attempts < 2:
                    attempts += 1
                    continue
                if decision == "continue":
                    self._append(st, ErrorLog(message=str(e), where="model", step=st.step))
                    break
                raise
        for el in parser.close():
            self._append(st, ErrorLog(message=f"<{el.name}> was not closed at the end of the response", where="parser", step=st.step))
            self._element(st, el, calls)
        if not parser.saw_tags and parser.stray_text.strip():
            self._output(st, None, parser.stray_text.strip(), {})
        elif parser.saw_tags and not calls and not any(
            isinstance(e, OutputLog) and e.step == st.step for e in st.logs
        ) and parser.stray_text.strip() and not self._has_thought(st):
            self._output(st, None, parser.stray_text.strip(), {})
        if calls:
            await asyncio.gather(*(c.task for c in calls if c.task is not None), return_exceptions=True)
        if st.output_chain is not None:
            await st.output_chain
        st.run.prompt_tokens += step_log.prompt_tokens
        st.run.completion_tokens += step_log.completion_tokens
        step_log.duration = time.monotonic() - started
        self._append(st, step_log)
        hub.observe_step(st.ctx, step_log)

    def _has_thought(self, st: _RunState) -> bool:
        return any(isinstance(e, ThoughtLog) and e.step == st.step for e in st.logs)

    def _on_retry(self, st: _RunState) -> Callable[[int, float, Exception], None]:
        def note(attempt: int, delay: float, e: Exception) -> None:
            st.progress()
            self._append(st, ErrorLog(message=f"model error, retry {attempt + 1} in {delay:.2f}s: {e}", where="model", step=st.step))

        return note

    async def _on_error(self, st: _RunState, e: BaseException) -> str:
        hook = st.instance.definition.on_error
        if hook is None:
            return "abort"
        decision = hook(e, st.ctx)
        if asyncio.iscoroutine(decision):
            decision = await decision
        if decision not in ("continue", "retry", "abort"):
            log.error("on_error hook of %s returned %r; aborting", st.instance.type, decision)
            return "abort"
        return decision

    async def _hook(self, fn: Callable[..., Any] | None, *args: Any) -> None:
        if fn is None:
            return
        res = fn(*args)
        if asyncio.iscoroutine(res):
            await res

    # --- elements -----------------------------------------------------------------------

    def _element(self, st: _RunState, el: Element, calls: list[_Call]) -> None:
        el = self.hub.redactor.redact_element(el)  # a secret the model writes is masked as it enters
        name = el.name
        if name in THOUGHT_TAGS:
            text = el.content.strip()
            if text:
                self._append(st, ThoughtLog(content=text, step=st.step))
                log.debug("run %s thought: %s", st.run.id, text[:200])
        elif name == "action_call":
            self._action_call(st, el, calls)
        elif name == "output":
            attrs = dict(el.attrs)
            otype = attrs.pop("type", None) or attrs.pop("name", None)
            attrs.pop("name", None)
            self._output(st, otype, el.content, attrs)

    def _action_call(self, st: _RunState, el: Element, calls: list[_Call]) -> None:
        name = el.attrs.get("name", "").strip()
        raw = el.content.strip()
        try:
            args: Any = json.loads(raw) if raw else {}
        except json.JSONDecodeError as e:
            args = raw
            error: str | None = f"arguments are not valid JSON ({e.msg} at position {e.pos})"
        else:
            error = None
        call = ActionCallLog(name=name, args=args, index=len(calls), step=st.step)
        self._append(st, call)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        entry = _Call(call, fut)
        calls.append(entry)
        action = st.actions.get(name)
        if error is None and action is None:
            known = ", ".join(sorted(st.actions)) or "none"
            error = f"unknown action {name!r}; available: {known}" if name else "action_call without a name attribute"
        if error is not None:
            self._result(st, call, ok=False, error=error)
            fut.set_exception(ActionError(name, error))
            fut.exception()  # retrieved: a later template reference reports it
            return
        assert action is not None
        entry.task = asyncio.create_task(self._run_call(st, action, call, fut, calls), name=f"action:{name}")
        st.tasks.add(entry.task)
        entry.task.add_done_callback(st.tasks.discard)

    async def _run_call(self, st: _RunState, action: Action, call: ActionCallLog, fut: asyncio.Future[Any], calls: list[_Call]) -> None:
        started = time.monotonic()
        try:
            raw = await _resolve_templates(call.args, calls[: call.index], call.index)
            try:
                args = action.schema.model_validate(raw)
            except ValidationError as e:
                raise ActionError(action.name, "invalid arguments: " + _validation_message(e)) from e
            ctx = st.ctx.derive(call=call)
            denial = await self.hub.authorize(action, ctx)
            if denial is not None:
                self._result(st, call, ok=False, error=denial, denied=True, started=started)
                fut.set_exception(ActionError(action.name, denial))
                fut.exception()
                if action.critical:
                    raise _Stop(RunState.REJECTED, f"denied: {denial}")
                return
            if action.memory:
                ctx.action_memory = await self.hub.memory.get(f"action:{action.memory}")
            result = await self._invoke(action, args, ctx)
            if action.memory:
                await self.hub.memory.set(f"action:{action.memory}", ctx.action_memory)
            data = _jsonable(result)
            self._result(st, call, ok=True, data=data, started=started)
            fut.set_result(data)
            if action.on_success is not None:
                await self._hook(action.on_success, result, ctx)
        except _Stop as e:
            st.slot.stop_with(e)  # ends the whole run, not only this call
        except asyncio.CancelledError:
            if not fut.done():
                fut.cancel()
            raise
        except Exception as e:
            message = str(e) if isinstance(e, ActionError) else f"action {action.name!r} failed: {type(e).__name__}: {e}"
            if not isinstance(e, ActionError):
                log.warning("run %s: %s", st.run.id, message, exc_info=e)
            self._result(st, call, ok=False, error=message, started=started)
            if not fut.done():
                fut.set_exception(e if isinstance(e, ActionError) else ActionError(action.name, message))
                fut.exception()
            if action.on_error is not None:
                try:
                    await self._hook(action.on_error, e, st.ctx.derive(call=call))
                except Exception:
                    log.exception("on_error hook of action %s failed", action.name)
        finally:
            st.progress()

    async def _invoke(self, action: Action, args: BaseModel, ctx: RunContext) -> Any:
        timeout = action.timeout or self.hub.config.agent.action_timeout
        lock = self.hub.runner.queue_lock(action.queue) if action.queue else None
        attempt = 0
        while True:
            try:
                if lock is not None:
                    async with lock:
                        return await asyncio.wait_for(action.handler(args, ctx), timeout)
                return await asyncio.wait_for(action.handler(args, ctx), timeout)
            except RetryAction as e:
                if attempt >= action.retry:
                    raise ActionError(action.name, f"gave up after {attempt + 1} attempts: {e}") from e
            except TimeoutError as e:
                if attempt >= action.retry:
                    raise ActionError(action.name, f"timed out after {timeout:g}s") from e
            attempt += 1
            await asyncio.sleep(min(5.0, 0.2 * 2**attempt))

    def _result(self, st: _RunState, call: ActionCallLog, *, ok: bool, data: Any = None, error: str | None = None, denied: bool = False, started: float | None = None) -> None:
        entry = ActionResultLog(
            call_id=call.id,
            name=call.name,
            ok=ok,
            data=self.hub.redactor.redact_tree(data),  # masked as it enters the run
            error=self.hub.redactor.redact(error) if error else error,
            denied=denied,
            step=st.step,
            duration=(time.monotonic() - started) if started else 0.0,
        )
        self._append(st, entry)

    def _output(self, st: _RunState, otype: str | None, content: str, attrs: dict[str, str]) -> None:
        definition = st.instance.definition
        otype = otype or definition.reply_output
        out = st.outputs.get(otype) if otype else None
        entry = OutputLog(type=otype or "", content=self.hub.redactor.redact(content.strip()), attrs=attrs, step=st.step)
        if out is None:
            known = ", ".join(sorted(st.outputs)) or "none"
            entry.error = f"unknown output type {otype!r}; available: {known}" if otype else "output without a type"
            self._append(st, entry)
            self._feedback(st, entry.error)
            return
        try:
            value: Any = entry.content
            if not out.is_text:
                from pydantic import TypeAdapter

                value = TypeAdapter(out.schema).validate_python(json.loads(entry.content))
                entry.content = _jsonable(value)
            attributes = out.attributes.model_validate(attrs)
        except (ValidationError, json.JSONDecodeError) as e:
            msg = _validation_message(e) if isinstance(e, ValidationError) else f"content is not valid JSON ({e.msg})"
            entry.error = f"output {out.type!r} rejected: {msg}"
            self._append(st, entry)
            self._feedback(st, entry.error)
            return
        if out.is_text and not entry.content:
            return  # an empty reply says nothing; nothing to send
        ctx = st.ctx.derive(attributes=attributes)
        previous = st.output_chain
        st.output_chain = asyncio.create_task(self._send(st, out, value, ctx, entry, previous), name=f"output:{out.type}")
        st.logs.append(entry)  # persisted once its send is over, with its outcome

    async def _send(self, st: _RunState, out: Output, value: Any, ctx: RunContext, entry: OutputLog, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await previous
        try:
            data = await out.handler(value, ctx)
        except asyncio.CancelledError:
            entry.error = "cancelled before it was sent"
            self.hub.runs.append(st.run, entry)
            raise
        except Exception as e:
            entry.error = f"{type(e).__name__}: {e}"
            log.error("run %s: output %s failed: %s", st.run.id, out.type, entry.error)
        else:
            entry.sent = True
            if data is not None:
                entry.data = _jsonable(data)
        st.progress()
        self.hub.runs.append(st.run, entry)
        if entry.sent:
            # durable before anything else happens: a crash from here on must not answer twice
            await self.hub.runs.sync()
        self.hub.observe_output(st.ctx, entry)

    def _feedback(self, st: _RunState, message: str) -> None:
        st.feedback = True
        self._append(st, ErrorLog(message=message, where="output", step=st.step))

    # --- finishing ----------------------------------------------------------------------

    async def _finish(self, st: _RunState | None, run: RunRecord, logs: list[Log], state: RunState, reason: str | None, slot: Slot) -> RunResult:
        if st is not None:
            for t in list(st.tasks):
                t.cancel()
            if st.tasks:
                await asyncio.gather(*st.tasks, return_exceptions=True)
            if st.output_chain is not None and not st.output_chain.done():
                st.output_chain.cancel()
                await asyncio.gather(st.output_chain, return_exceptions=True)
        run.state, run.reason, run.ended = state, reason, time.time()
        logs.append(StateLog(state=str(state), reason=reason))
        self.hub.runs.append(run, logs[-1])
        result = RunResult(
            run_id=run.id,
            context=slot.id,
            state=state,
            reason=reason,
            logs=logs,
            steps=run.steps,
            prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens,
            duration=run.ended - run.started,
        )
        try:
            if st is not None:
                await self.save(st.instance, logs, st.ctx)
                await self._hook(st.instance.definition.on_run, st.ctx)
            answered = any(isinstance(e, OutputLog) and e.sent for e in logs)
            taken = [e.id for e in logs if isinstance(e, InputLog)]
            if state != RunState.KILLED or reason not in ("shutdown", "cancelled") or answered:
                await self.hub.inbox.done(taken)
            await self.hub.runs.finish(run)
        except Exception:
            log.exception("run %s: saving its end failed", run.id)
        if state == RunState.COMPLETED:
            log.info("run %s %s: completed in %d steps", run.id[:8], slot.id, run.steps)
        else:
            log.warning("run %s %s: %s (%s)", run.id[:8], slot.id, state, reason)
        await self.hub.after_run(result, st.ctx if st else None)
        return result


async def _resolve_templates(value: Any, earlier: list[_Call], index: int) -> Any:
    if isinstance(value, str):
        m = _TEMPLATE.match(value.strip())
        if m is None:
            return value
        n = int(m.group(1))
        if n >= len(earlier):
            raise ActionError("template", f"{value!r} refers to call {n}, but this is call {index} of the response")
        try:
            data = await earlier[n].done
        except ActionError as e:
            raise ActionError(earlier[n].log.name, f"{value!r}: that call failed ({e})") from e
        for attr, idx in _PATH_PART.findall(m.group(2)):
            try:
                data = data[attr] if attr else data[int(idx)]
            except (KeyError, IndexError, TypeError) as e:
                raise ActionError(earlier[n].log.name, f"{value!r}: no {attr or idx!r} in its result") from e
        return data
    if isinstance(value, dict):
        return {k: await _resolve_templates(v, earlier, index) for k, v in value.items()}
    if isinstance(value, list):
        return [await _resolve_templates(v, earlier, index) for v in value]
    return value


def _validation_message(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def _escape_json(value: Any) -> str:
    from .prompt import escape

    return escape(json.dumps(value, ensure_ascii=False, default=str))


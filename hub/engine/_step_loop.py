"""The step loop: prepare, prompt, stream, act on each element as it closes, loop, finish.

One `Engine` per hub. `Engine.run()` drives one run of one context instance's
slot (`Slot`), which the `Intake` hands it, one run at
a time; the run takes the inputs that arrive in the slot meanwhile at its next step boundary.

An element acts when its closing tag arrives: thoughts are logged, action calls are started
(`hub.engine`), outputs are sent in order (`hub.engine`). Only closed elements
act: an element the stream ended inside is reported, never run or delivered as if whole. A
stream that broke before anything acted is retried with a fresh parser.

Every run ends: whatever raises (a store, a hook, a bug), the run is finished in a terminal
state with a reason, each step of its end isolated from the others.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from ..definitions import RunResult, StopRun, store_reason
from ..errors import ContextTooLong, ModelError, StoreError
from ..logging_setup import context_id_var, run_id_var
from ..logs import ActionResultLog, ErrorLog, InputLog, Log, OutputLog, StateLog, StepLog, ThoughtLog
from ..models import ModelRequest, Usage, stream_with_retry
from ..protocol import Element, ElementParser, LiveParser, Partial, ToolsPrompt
from ..store import RunRecord, RunState
from ..tasks import cancel_and_wait
from ._actions import ActionCalls, Call
from ._active_run import ERROR_RETRIES, Run
from ._attachments import Attachments
from ._compaction import Compactor
from ._conversation import available, conversation, prepare, prompt_parts, save
from ._outputs import OutputDispatch, output_type
from ._run_summary import describe_input, note_reply
from ._tool_step import ToolStep

if TYPE_CHECKING:
    from ._deps import EngineDeps
    from ._runner import Slot

__all__ = ["Engine"]

log = logging.getLogger("hub.engine")

THOUGHT_TAGS = frozenset({"reasoning", "think", "thinking"})
LIVE_GRACE = 5.0
"""Seconds a live reply a run ended inside gets to show its text marked as cut off."""

FINISH_GRACE = 10.0
"""Seconds a run's end (hooks, memory, row, inbox) may take once the hub stops under it."""


class Engine:
    """The step loop, given what it uses (`EngineDeps`), never the hub."""

    def __init__(self, deps: EngineDeps) -> None:
        self.deps = deps
        self.calls = ActionCalls(deps)
        self.dispatch = OutputDispatch(deps)
        self.attachments = Attachments(deps)
        self.compactor = Compactor(deps)
        # prompt_style = "tools": the model's native tool calls, a path of its own beside the XML one
        self.tools_prompt = ToolsPrompt(deps.model.prompts)
        self.tool_step = ToolStep(deps, self.calls, self.dispatch, on_error=self._on_error, on_retry=self._on_retry)

    # --- the run ------------------------------------------------------------------------

    async def run(self, slot: Slot) -> RunResult:
        """One run of ``slot``'s context instance, to a terminal state. Never raises, but for
        a cancellation from outside (after the run was finished as ``killed``)."""
        deps = self.deps
        cfg = deps.config.agent
        first = slot.peek()
        record = RunRecord(context=slot.id, parent_id=slot.parent_of(first), user=first.user if first else None)
        describe_input(record, first)
        run = Run(deps, record, slot)
        run_id_var.set(record.id)
        context_id_var.set(slot.id)
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + cfg.run_timeout
        state, reason = RunState.COMPLETED, None
        store_failure: StoreError | None = None  # the store error that failed the run
        slot.current = record.id  # a stop may end this run until it decides how it ends
        clock: _RunClock | None = None
        try:
            # queued now, committed with the conversation's row that prepare() waits for; the
            # inputs are taken after it (what arrived meanwhile is in the first step, and the
            # `busy` modes decide the rest), their take committed at the first step's sync
            run.creating = deps.runs.create_soon(record)
            async with asyncio.timeout_at(min(deadline, started + cfg.heartbeat_timeout)) as timer:
                clock = _RunClock(loop, timer, deadline=deadline, heartbeat=cfg.heartbeat_timeout)
                inst = conversation(deps, slot.definition, slot.args, slot.key)
                ctx = run.context_for(inst, clock.progress, clock.pause)
                await prepare(deps, inst, ctx)
                run.attach(inst, ctx)
                self._take_inputs(run)
                await deps.plugins.before_run(ctx)
                state, reason = await self._loop(run)
        except StopRun as e:
            state, reason, store_failure = e.state, e.reason, e.store_failure
        except TimeoutError:
            state = RunState.KILLED
            deadline = clock.deadline if clock is not None else deadline  # moved by waits on a person
            reason = "timeout" if loop.time() >= deadline - 0.01 else "stalled"
        except asyncio.CancelledError:
            stop = slot.stop_exc
            task = asyncio.current_task()
            if stop is None or task is None:
                slot.current = None  # a stop arriving now must not cancel this end
                await self._finish_uncancelled(run, RunState.KILLED, slot.cancel_reason or "cancelled")
                raise
            task.uncancel()  # our own stop (a critical denial, a store error), not one from outside
            state, reason, store_failure = stop.state, stop.reason, stop.store_failure
        except ModelError as e:
            state, reason = RunState.FAILED, str(e)
        except StoreError as e:  # the store failed the run: recorded, its inputs retried
            state, reason, store_failure = RunState.FAILED, store_reason(e), e
            log.error("run %s of %s: %s", record.id, slot.id, reason)
            await self._store_error_seen(run, e)
        except Exception as e:  # a failing hook, a bug: recorded, never swallowed silently
            log.exception("run %s of %s failed", record.id, slot.id)
            state, reason = RunState.FAILED, f"internal error: {type(e).__name__}: {e}"
        slot.current = None  # a stop arriving from now on must not cancel the run's end
        if not run.input_ids:
            try:  # a run that failed before its first step still answers the inputs it was for
                self._take_inputs(run)
            except Exception as e:
                log.error("run %s: taking its inputs failed: %s", record.id, e)
        return await self._finish_uncancelled(run, state, reason, store_failure=store_failure)

    async def _finish_uncancelled(
        self, run: Run, state: RunState, reason: str | None, *, store_failure: StoreError | None = None
    ) -> RunResult:
        """`_finish()` in a task of its own, so that a cancellation of the run's task (the
        hub stopping under a run that is ending) does not cut it short: the memory is saved,
        the row made final and the inputs marked done, within ``FINISH_GRACE`` seconds; the
        cancellation is raised after, with the end left on the slot for the waiters."""
        finishing = asyncio.create_task(
            self._finish(run, state, reason, store_failure=store_failure), name=f"finish:{run.id[:8]}"
        )
        try:
            return await asyncio.shield(finishing)
        except asyncio.CancelledError:
            await asyncio.wait({finishing}, timeout=FINISH_GRACE)
            if not finishing.done():
                log.error("run %s: its end took over %.0fs as the hub stopped; cut short", run.id, FINISH_GRACE)
                await cancel_and_wait(finishing)
            elif not finishing.cancelled() and finishing.exception() is None:
                run.slot.ended = finishing.result()
            raise

    def _take_inputs(self, run: Run) -> list[InputLog]:
        """The slot's waiting inputs, now the run's: in its log, queued as events and as the
        inbox's take (committed with the next commit)."""
        taken = run.slot.take(run.id)
        if not taken:
            return []
        # in the run's log first: whatever the store does next, the run answers these inputs
        run.logs.extend(taken)
        run.input_ids.extend(e.id for e in taken)
        if run.ctx is not None:
            run.ctx.inputs = [*run.ctx.inputs, *taken]
        for entry in taken:
            self.deps.runs.append(run.record, entry)
        self.deps.inbox.take([e.id for e in taken], run.id)
        return taken

    async def _loop(self, run: Run) -> tuple[RunState, str | None]:
        cfg = self.deps.config.agent
        assert run.instance is not None
        max_steps = run.instance.definition.max_steps or cfg.max_steps
        while True:
            if run.step >= max_steps:
                return RunState.KILLED, f"max_steps ({max_steps})"
            run.step += 1
            run.record.steps = run.step
            run.feedback = False
            available(self.deps, run)
            await self._context_hooks(run, "on_step")
            await self._step(run)
            note_reply(run.record, run.logs)
            self.deps.runs.update(run.record)
            if cfg.max_run_tokens and run.record.tokens > cfg.max_run_tokens:
                return RunState.KILLED, f"max_tokens ({cfg.max_run_tokens})"
            limit, run.limit = run.limit, None  # a plugin's stop reason after this step
            if limit:
                return RunState.KILLED, limit
            new_inputs = self._take_inputs(run)
            unprocessed = any(isinstance(e, (ActionResultLog, OutputLog)) and not e.processed for e in run.logs)
            if not (unprocessed or new_inputs or run.feedback):
                return RunState.COMPLETED, None

    # --- one step -----------------------------------------------------------------------

    async def _step(self, run: Run) -> None:
        """One step: the new inputs made durable, the prompt built, the response streamed
        and acted on as its elements close, what was left open reported, then the step's
        calls and outputs awaited and the step recorded."""
        await self._inputs_durable(run)
        started = time.monotonic()
        if await self._answered_refused_files(run, started):
            return
        request, fresh, summarised = await self._prompt(run)
        step_log = StepLog(step=run.step)
        try:
            calls = await self._model_step(run, request, step_log, started)
        except ContextTooLong:
            # the model refused the prompt as too long: fold more of the history into the
            # summary and ask once more; refused again (or nothing to fold), the run fails
            used = await self.compactor.compact(run, refused=True) if self.compactor.enabled else None
            if used is None:
                raise
            _add(summarised, used)
            request = self._rebuild(run, fresh)
            calls = await self._model_step(run, request, step_log, started)
        # the summary calls count in the step that needed them: its tokens, cost and budgets
        step_log.prompt_tokens += summarised.prompt_tokens
        step_log.completion_tokens += summarised.completion_tokens
        step_log.cached_tokens += summarised.cached_tokens
        if calls:
            await asyncio.gather(*(c.task for c in calls if c.task is not None), return_exceptions=True)
        if run.output_chain is not None:
            await run.output_chain
        run.record.prompt_tokens += step_log.prompt_tokens
        run.record.completion_tokens += step_log.completion_tokens
        # at the prices of the model that answered (a fallback's own, when one did)
        config = self.deps.config
        priced = config.models.get(step_log.model, config.model)
        run.record.cached_tokens += step_log.cached_tokens
        step_log.cost = priced.cost(step_log.prompt_tokens, step_log.completion_tokens, step_log.cached_tokens)
        run.record.cost += step_log.cost
        if step_log.model and step_log.model not in run.record.models.split(","):
            run.record.models = f"{run.record.models},{step_log.model}" if run.record.models else step_log.model
        step_log.duration = time.monotonic() - started
        run.append(step_log)
        run.limit = self.deps.plugins.after_step(run.ctx, step_log)  # type: ignore[arg-type]

    async def _inputs_durable(self, run: Run) -> None:
        """Before the model (and any action) can act on new inputs, their `take` is on disk:
        if the process then dies, the next start knows this run had them and counts the
        crash against them (a poison input is parked, not resumed forever)."""
        if run.durable_inputs < len(run.input_ids) or run.creating is not None:
            await self.deps.runs.sync()
            run.durable_inputs = len(run.input_ids)
            await self._created(run)

    async def _answered_refused_files(self, run: Run, started: float) -> bool:
        """New inputs that bring nothing but files the hub refuses (too large, a bomb, an
        archive): the user is told why, and no model is asked about them. True if so."""
        new = [e for e in run.logs if isinstance(e, InputLog) and not e.processed]
        await self.attachments.prepare(run)
        refusal = self.attachments.refusal(new, run)
        if refusal is None or not self._refuse_files(run, refusal):
            return False
        if run.output_chain is not None:
            await run.output_chain
        run.append(StepLog(step=run.step, duration=time.monotonic() - started))
        return True

    async def _model_step(self, run: Run, request: ModelRequest, step_log: StepLog, started: float) -> list[Call]:
        """Stream this step's response in the prompt's style and act on it; the calls started."""
        if self.deps.config.model.prompt_style == "tools":
            return await self.tool_step.run(run, request, step_log, started)
        stream = await self._stream(run, request, step_log, started)
        self._stream_ended(run, stream)
        return stream.calls

    async def _prompt(self, run: Run) -> tuple[ModelRequest, list[Log], Usage]:
        """This step's request, after a compaction when one is due (`hub.engine`'s
        compaction); the entries it shows as new, and what the summary calls used. A failed
        compaction leaves the oldest history out, as it would be without one."""
        request, fresh = self._request(run)
        used = Usage()
        if self.compactor.due(run, request):
            try:
                summarised = await self.compactor.compact(run)
            except ModelError as e:
                log.warning("run %s: compaction failed: %s", run.id[:8], e)
                run.append(
                    ErrorLog(
                        message=f"compaction failed, the oldest history is left out of this prompt: {e}",
                        where="model",
                        step=run.step,
                    )
                )
                summarised = None
            if summarised is not None:
                _add(used, summarised)
                request = self._rebuild(run, fresh)
        return request, fresh, used

    def _rebuild(self, run: Run, fresh: list[Log]) -> ModelRequest:
        """The step's request built again (after a compaction), showing as new what was new."""
        for e in fresh:
            e.processed = False  # type: ignore[union-attr]
        return self._request(run)[0]

    def _request(self, run: Run) -> tuple[ModelRequest, list[Log]]:
        """This step's prompt, in the style the model takes, and the entries it showed as
        new: what it shows is seen from now on."""
        deps = self.deps
        parts = prompt_parts(deps, run)
        parts.media = run.media.shown
        style = deps.config.model.prompt_style
        chat_style = style == "chat" or (style == "auto" and deps.model.is_local() and not run.actions)
        if not chat_style and self.attachments.vision:
            parts.images = run.media.images
        prompts = deps.model.prompts
        if style == "tools":
            request = self.tools_prompt.build(parts)
        else:
            request = prompts.build_chat(parts) if chat_style else prompts.build(parts)
        fresh: list[Log] = []
        for e in run.logs:
            if isinstance(e, (InputLog, ActionResultLog, OutputLog)) and not e.processed:
                e.processed = True
                fresh.append(e)
        return request, fresh

    async def _stream(self, run: Run, request: ModelRequest, step_log: StepLog, started: float) -> _Stream:
        """Stream the response, acting on each element as it closes. A stream that broke
        after something acted stops there (what acted stays acted); one that broke before is
        retried with a fresh parser, or handled as the context's ``on_error`` decides."""
        # the content of an open <output> is only reported when some output can use it
        live = any(o.live for o in run.outputs.values())
        retries = 0
        while True:
            # every attempt starts clean: a retry never glues onto what a broken one said
            stream = _Stream(LiveParser() if live else ElementParser(), len(run.logs))
            run.live, run.output_open = None, False
            try:
                await self._read(run, request, stream, step_log, started)
                return stream
            except ModelError as e:
                if stream.acted(run):
                    # what was still open is reported when the stream ends, never run
                    run.append(ErrorLog(message=f"model stream broke: {e}", where="model", step=run.step))
                    stream.broken = True
                    return stream
                if isinstance(e, ContextTooLong) and self.compactor.enabled:
                    raise  # the step compacts the history and asks again
                if not await self._after_break(run, e, stream.parser, retries):
                    stream.broken = True  # what it read goes on, marked as cut off, never as whole
                    return stream
                retries += 1

    async def _read(self, run: Run, request: ModelRequest, stream: _Stream, step_log: StepLog, started: float) -> None:
        """One attempt: the model's chunks fed to the parser, each element acted on as it
        closes (and each piece of an open live output handed to its handler)."""
        deps = self.deps
        parser, calls = stream.parser, stream.calls
        model = deps.model
        async with (
            deps.limits.llm_slot(),
            aclosing(
                stream_with_retry(
                    model.pick(run.route),
                    request,
                    model.retry_policy,
                    on_retry=self._on_retry(run),
                    on_error=model.on_error,
                )
            ) as chunks,
        ):
            first_at = None
            async for chunk in chunks:
                if isinstance(chunk, Usage):
                    step_log.prompt_tokens = chunk.prompt_tokens
                    step_log.completion_tokens = chunk.completion_tokens
                    step_log.model = chunk.model or ""
                    step_log.cached_tokens = chunk.cached_tokens
                    stream.finish_reason = chunk.finish_reason
                    continue
                if not isinstance(chunk, str):  # a tool call's piece: only a tools request gets them
                    continue
                if first_at is None:
                    first_at = time.monotonic()
                    step_log.llm_latency = first_at - started
                run.progress()
                if isinstance(parser, LiveParser):
                    for item in parser.feed_live(chunk):
                        if isinstance(item, Partial):
                            self.dispatch.partial(run, item)
                        else:
                            self._element(run, item, calls)
                else:
                    for el in parser.feed(chunk):
                        self._element(run, el, calls)

    async def _after_break(self, run: Run, e: ModelError, parser: ElementParser, retries: int) -> bool:
        """A stream that broke before anything acted: True to stream again (a retryable
        error within the policy, or ``on_error`` said retry), False to go on with what was
        read (``on_error`` said continue); raises ``e`` to fail the run (abort)."""
        policy = self.deps.model.retry_policy

        def dropped() -> int:  # closes the parser: only for an attempt that is thrown away
            return len(parser.stray_text) + sum(len(el.content) for el in parser.close())

        if e.retryable and retries < policy.max_retries:
            delay = policy.delay(retries)
            run.append(
                ErrorLog(
                    message=f"model stream broke before anything acted ({e}); retrying with a fresh parser "
                    f"in {delay:.2f}s, {dropped()} characters of the broken response dropped",
                    where="model",
                    step=run.step,
                )
            )
            run.progress()
            await asyncio.sleep(delay)
            return True
        decision = await self._on_error(run, e)
        if decision == "retry" and retries < policy.max_retries:
            run.append(
                ErrorLog(
                    message=f"{e}; retrying as on_error decided, {dropped()} characters dropped",
                    where="model",
                    step=run.step,
                )
            )
            return True
        if decision == "continue":
            run.append(
                ErrorLog(message=f"{e}; going on with what was read, marked as cut off", where="model", step=run.step)
            )
            return False
        raise e

    def _stream_ended(self, run: Run, stream: _Stream) -> None:
        """What the response left: a cut at the token limit reported, every element still
        open reported (an action never runs, an output goes out marked as cut off), and the
        text outside any element handled."""
        # a stream that broke is cut off as surely as one cut at the token limit
        cut_off = stream.finish_reason == "length" or stream.broken
        if stream.finish_reason == "length":
            run.append(
                ErrorLog(message="the response was cut off at the model's token limit", where="model", step=run.step)
            )
        parser, calls = stream.parser, stream.calls
        if isinstance(parser, LiveParser):
            for item in parser.close_live():
                if isinstance(item, Partial):
                    self.dispatch.partial(run, item)
                else:
                    self._cut_off(run, item, calls)
        else:
            for el in parser.close():
                self._cut_off(run, el, calls)
        self.dispatch.stray(run, parser, answered=bool(calls), cut_off=cut_off)

    def _refuse_files(self, run: Run, text: str) -> bool:
        """Answer with ``text`` through the conversation's reply output, if it has one."""
        assert run.instance is not None
        reply = run.instance.definition.reply_output
        if reply is None or reply not in run.outputs:
            return False
        for e in run.logs:
            if isinstance(e, InputLog):
                e.processed = True
        self.dispatch.dispatch(run, reply, text, {})
        return True

    def _on_retry(self, run: Run) -> Callable[[int, float, Exception], None]:
        def note(attempt: int, delay: float, e: Exception) -> None:
            run.progress()
            run.append(
                ErrorLog(message=f"model error, retry {attempt + 1} in {delay:.2f}s: {e}", where="model", step=run.step)
            )

        return note

    async def _on_error(self, run: Run, e: BaseException) -> str:
        return await run.on_error(e, default="abort")

    @staticmethod
    async def _store_error_seen(run: Run, e: StoreError) -> None:
        """Show ``on_error`` a store error that failed the run. Whatever it answers, the run
        fails and its inputs wait in the inbox for a run once the store is back: nothing
        is lost, and nothing the run did is taken for done."""
        try:
            decision = await run.on_error(e, default="abort")
        except Exception:
            log.exception("run %s: on_error hook failed on a store error", run.id)
            return
        if decision != "abort":
            log.info("run %s: on_error answered %r to a store error; the run fails all the same", run.id, decision)

    async def _context_hooks(self, run: Run, name: str, *, ending: bool = False) -> None:
        """The hook ``name`` (``on_step``, ``on_run``) of the run's context, then of each
        context it uses (each seeing its own memory and args)."""
        assert run.instance is not None and run.ctx is not None
        await self._context_hook(run, name, getattr(run.instance.definition, name), run.ctx, ending=ending)
        for sub in run.instance.used:
            fn = getattr(sub.definition, name)
            if fn is not None:
                await self._context_hook(run, f"{sub.type} {name}", fn, run.ctx.derive(context=sub), ending=ending)

    async def _context_hook(
        self, run: Run, name: str, fn: Callable[..., Any] | None, ctx: Any, *, ending: bool = False
    ) -> None:
        """A context hook (``on_step``, ``on_run``); one that raises is shown to ``on_error``:
        "retry" calls it again (at most ``ERROR_RETRIES`` times), "continue" goes on with the
        error in the run's log, "abort" raises it (the run fails). Without an ``on_error``,
        ``on_step`` fails the run and ``on_run`` (the run is ending) is recorded."""
        tries = 0
        while True:
            try:
                await _hook(fn, ctx)
                return
            except (StopRun, StoreError, asyncio.CancelledError):
                raise
            except Exception as e:
                decision = await run.on_error(e, default="continue" if ending else "abort")
                if decision == "retry" and tries >= ERROR_RETRIES:
                    decision = "abort"  # as for the model's errors: a retry past the bound aborts
                if decision == "retry":
                    tries += 1
                    run.append(
                        ErrorLog(
                            message=f"{name} hook failed: {type(e).__name__}: {e}; retrying as on_error decided",
                            where="hook",
                            step=run.step,
                        )
                    )
                    continue
                if decision == "abort" and not ending:
                    raise
                message = f"{name} hook failed: {type(e).__name__}: {e}"
                run.append(ErrorLog(message=message, where="hook", step=run.step))
                if decision == "abort":  # the run is ending: it ends failed
                    run.aborted = f"{message} (on_error aborted the run)"
                return

    # --- elements -----------------------------------------------------------------------

    def _element(self, run: Run, el: Element, calls: list[Call]) -> None:
        el = self.deps.redactor.redact_element(el)  # a secret the model writes is masked as it enters
        name = el.name
        if name in THOUGHT_TAGS:
            text = el.content.strip()
            if text:
                run.append(ThoughtLog(content=text, step=run.step))
                log.debug("run %s thought: %s", run.id, text[:200])
        elif name == "action_call":
            self.calls.start(run, el, calls)
        elif name == "output":
            if run.output_open and self.dispatch.close_live(run, el):
                return
            otype, attrs = output_type(el.attrs)
            self.dispatch.dispatch(run, otype, el.content, attrs)
        else:
            log.info("run %s: dropped a <%s> element the engine does not act on: %r", run.id, name, el.content[:200])

    def _cut_off(self, run: Run, el: Element, calls: list[Call]) -> None:
        """An element the stream ended inside: reported; an action never runs, an output is
        marked as cut off."""
        el = self.deps.redactor.redact_element(el)
        run.append(
            ErrorLog(message=f"<{el.name}> was not closed at the end of the response", where="parser", step=run.step)
        )
        if el.name == "action_call":
            self.calls.cut_off(run, el, calls)
        elif el.name == "output":
            if run.output_open and self.dispatch.close_live(run, el):
                return
            otype, attrs = output_type(el.attrs)
            self.dispatch.dispatch(run, otype, el.content, attrs, cut_off=True)
        else:
            self._element(run, el, calls)

    # --- finishing ----------------------------------------------------------------------

    async def _finish(
        self, run: Run, state: RunState, reason: str | None, *, store_failure: StoreError | None = None
    ) -> RunResult:
        """End the run: each step isolated, so the row, the inbox and the result agree.
        ``store_failure``: the store error that failed the run (its reason says it in words)."""
        for t in list(run.tasks):
            t.cancel()
        if run.tasks:
            await asyncio.gather(*run.tasks, return_exceptions=True)
        if reason not in ("shutdown", "cancelled") and self.dispatch.abandon_live(run) and run.output_chain is not None:
            # a live reply the run ended inside (a limit): shown marked as cut, within a bound;
            # after a shutdown it is left as a draft that the next start completes instead
            await asyncio.wait({run.output_chain}, timeout=LIVE_GRACE)
        if run.output_chain is not None and not run.output_chain.done():
            run.output_chain.cancel()
        if run.output_chain is not None:
            await asyncio.gather(run.output_chain, return_exceptions=True)
        record, logs, inst, ctx = run.record, run.logs, run.instance, run.ctx
        failure: tuple[StoreError, str] | None = None  # a store that failed while ending the run, and why
        marked = False  # the inputs were marked done with the memory's save
        if inst is not None and ctx is not None:
            # the seed's order: on_run may still change memory, then memory is saved
            await self._step_of_end(run, "on_run hook", lambda: self._context_hooks(run, "on_run", ending=True))
            if run.aborted is not None and state == RunState.COMPLETED:  # on_error said abort
                state, reason = RunState.FAILED, run.aborted
            taken = _inputs(logs)
            saving = self._step_of_end(run, "saving memory", lambda: save(self.deps, inst, logs, ctx))
            if taken and _answered(logs):
                # an answered run's inputs are done whatever the save does (below): issued
                # together, the two share one commit, as the save's own writes do
                marking = self._step_of_end(run, "marking its inputs done", lambda: self.deps.inbox.done(taken))
                failure, unmarked = await asyncio.gather(saving, marking)
                failure, marked = unmarked or failure, True
            else:
                failure = await saving
        answered = _answered(logs)
        stopped = state == RunState.KILLED and reason in ("shutdown", "cancelled")
        # a run the store failed answered nothing: its inputs stay in the inbox, and the
        # runner hands them to a new run once the store is back (or the next start does)
        store_failed = failure is not None or store_failure is not None
        if not marked and (taken := _inputs(logs)) and (answered or not (stopped or store_failed)):
            failure = (
                await self._step_of_end(run, "marking its inputs done", lambda: self.deps.inbox.done(taken)) or failure
            )
        if failure is not None and state in (RunState.COMPLETED, RunState.RUNNING):
            state, (store_failure, reason) = RunState.FAILED, failure
        record.state, record.reason, record.ended = state, reason, time.time()
        record.store_failed = store_failure is not None
        note_reply(record, logs)
        end = StateLog(state=str(state), reason=reason)
        logs.append(end)
        unrecorded = await self._record_end(run, end)
        if unrecorded is not None and state != RunState.FAILED:
            # the row could not be written: the caller is told, not shown a success
            state, (error, reason) = RunState.FAILED, unrecorded
            store_failure = error if isinstance(error, StoreError) else None
            record.state, record.reason, end.state, end.reason = state, reason, str(state), reason
        result = RunResult(
            run_id=record.id,
            context=run.slot.id,
            state=state,
            reason=reason,
            logs=logs,
            steps=record.steps,
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            duration=record.ended - record.started,
            store_failure=store_failure,
        )
        if state == RunState.COMPLETED:
            log.info("run %s %s: completed in %d steps", record.id[:8], run.slot.id, record.steps)
        else:
            log.warning("run %s %s: %s (%s)", record.id[:8], run.slot.id, state, reason)
        if result.reason:  # an exception's text can quote a secret: masked before plugins or callers see it
            result.reason = self.deps.redactor.redact(result.reason)
        try:
            await self.deps.plugins.after_run(result, ctx)
        except Exception:
            log.exception("run %s: after-run hooks failed", record.id)
        return result

    async def _step_of_end(
        self, run: Run, what: str, step: Callable[[], Awaitable[Any]]
    ) -> tuple[StoreError, str] | None:
        """Run one step of a run's end; a store error is tried once more. Returns the store's
        error and the ``store_error: ...`` reason if it still failed; other errors are recorded."""
        for attempt in (1, 2):
            try:
                await step()
                return None
            except StoreError as e:
                error = e
                log.error("run %s: %s failed (attempt %d): %s", run.id, what, attempt, store_reason(e))
            except Exception as e:
                log.error("run %s: %s failed: %s: %s", run.id, what, type(e).__name__, e, exc_info=e)
                run.logs.append(
                    ErrorLog(message=f"{what} failed: {type(e).__name__}: {e}", where="finish", step=run.step)
                )
                return None
        return error, f"{store_reason(error)} (while {what})"

    @staticmethod
    async def _created(run: Run) -> None:
        """Wait for the run's row queued at its start (raising the store's error)."""
        creating, run.creating = run.creating, None
        if creating is not None:
            await creating
            run.created = True

    async def _record_end(self, run: Run, end: StateLog) -> tuple[Exception, str] | None:
        """Write the run's row in its terminal state (creating it if the start could not).
        Returns the error and the reason (``store_error: ...`` for the store's) when it could
        not, even when tried again."""
        runs = self.deps.runs
        logged = False
        try:
            await self._created(run)  # a run that ended before its first step
        except Exception as e:
            log.error("run %s: recording its start failed: %s: %s", run.id, type(e).__name__, e)
        for attempt in (1, 2):
            try:
                if not run.created:
                    await runs.create(run.record)
                    run.created = True
                if not logged:
                    runs.append(run.record, end)
                    logged = True
                await runs.finish(run.record)
                return None
            except Exception as e:
                log.error("run %s: recording its end failed (attempt %d): %s: %s", run.id, attempt, type(e).__name__, e)
                error = e
                reason = store_reason(e) if isinstance(e, StoreError) else f"internal error: {type(e).__name__}: {e}"
        return error, f"{reason} (while recording the end of the run)"


def _inputs(logs: list[Log]) -> list[str]:
    """The ids of the inputs the run took."""
    return [e.id for e in logs if isinstance(e, InputLog)]


def _answered(logs: list[Log]) -> bool:
    """Whether the run answered: an output it sent that counts as an answer."""
    return any(isinstance(e, OutputLog) and e.answered for e in logs)


def _add(total: Usage, more: Usage) -> None:
    total.prompt_tokens += more.prompt_tokens
    total.completion_tokens += more.completion_tokens
    total.cached_tokens += more.cached_tokens


class _RunClock:
    """A run's two limits on its one timer: ``run_timeout`` (the deadline) and the heartbeat
    (no progress for ``heartbeat`` seconds: stalled). While a call waits on a person (an
    approval) neither counts: the timer is off, and the deadline moves by the wait."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timer: asyncio.Timeout, *, deadline: float, heartbeat: float):
        self.loop = loop
        self.timer = timer
        self.deadline = deadline
        self.heartbeat = heartbeat
        self.last_beat = loop.time()
        self.beat_every = min(0.5, heartbeat / 4)  # rescheduling the timer on every chunk costs
        self.waits = 0  # calls waiting on a person now
        self.waits_began = 0.0

    def progress(self) -> None:
        now = self.loop.time()
        if now - self.last_beat > self.beat_every and not self.waits:
            self.last_beat = now
            self._reschedule(now)

    def pause(self, on: bool) -> None:
        now = self.loop.time()
        if on:
            self.waits += 1
            if self.waits == 1:
                self.waits_began = now
                self.timer.reschedule(None)
            return
        if self.waits == 0:
            return
        self.waits -= 1
        if self.waits == 0:
            self.deadline += now - self.waits_began
            self.last_beat = now
            self._reschedule(now)

    def _reschedule(self, now: float) -> None:
        try:
            self.timer.reschedule(min(self.deadline, now + self.heartbeat))
        except RuntimeError:  # the run's limits are over: its end (a failure reply) is sending
            pass


class _Stream:
    """One attempt at streaming a step's response: its parser, the action calls it started,
    where the run's log stood when it began, the model's finish reason once reported, and
    whether the stream broke."""

    __slots__ = ("parser", "calls", "mark", "finish_reason", "broken")

    def __init__(self, parser: ElementParser, mark: int) -> None:
        self.parser = parser
        self.calls: list[Call] = []
        self.mark = mark
        self.finish_reason: str | None = None
        self.broken = False  # the model's stream broke: what it said is not whole

    def acted(self, run: Run) -> bool:
        """Whether anything of it acted: an action call started, an output accepted."""
        return bool(self.calls) or any(isinstance(x, OutputLog) and x.error is None for x in run.logs[self.mark :])


async def _value(res: Any) -> Any:
    """``res``, awaited when a hook or a factory returned a coroutine."""
    if asyncio.iscoroutine(res):
        return await res
    return res


async def _hook(fn: Callable[..., Any] | None, *args: Any) -> None:
    if fn is not None:
        await _value(fn(*args))

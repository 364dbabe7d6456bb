"""One step in the tools style (``prompt_style = "tools"``): the model's native tool calls.

The response streams text and ``tool_calls`` pieces (`ToolCallDelta`).
The text is the reply to the conversation the input came from, delivered live where the
reply output is live, else when the response ends. A tool call's pieces are assembled by
their index; a call is whole when the next one begins or the model finishes with a reason
that is not a cut, and it runs at once, as an action call (or an output, for an
``output_TYPE`` tool) through the same code as the XML protocol's ``<action_call>``. A call
the response ended inside (``finish_reason = "length"``, a broken stream) never runs: the
model is told in its next step. A stream that broke before anything acted is asked again.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ContextTooLong, ModelError
from ..logs import ErrorLog, OutputLog, StepLog
from ..models import ModelRequest, ToolCallDelta, Usage, stream_with_retry
from ..protocol import Element, Partial, ToolNames, ToolTarget, new_tool_call_id

if TYPE_CHECKING:
    from ._actions import ActionCalls, Call
    from ._active_run import Run
    from ._deps import EngineDeps
    from ._outputs import OutputDispatch

__all__ = ["ToolStep"]

_WHOLE = frozenset({"tool_calls", "stop", "function_call"})
"""Finish reasons after which the last tool call is whole (not ``length``, not a filter)."""


@dataclass(slots=True)
class _Pending:
    """A tool call being assembled from its pieces."""

    index: int
    name: str = ""
    id: str | None = None
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Turn:
    """One attempt at streaming a step's response in the tools style."""

    names: ToolNames
    mark: int
    text: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    pending: _Pending | None = None
    finish_reason: str | None = None

    def acted(self, run: Run) -> bool:
        """Whether anything of it acted: a call started, an output accepted (a live reply)."""
        return bool(self.calls) or any(isinstance(x, OutputLog) and x.error is None for x in run.logs[self.mark :])


class ToolStep:
    """Streams one step's response in the tools style and acts on it (see the module doc)."""

    def __init__(
        self,
        deps: EngineDeps,
        calls: ActionCalls,
        dispatch: OutputDispatch,
        *,
        on_error: Callable[[Run, BaseException], Awaitable[str]],
        on_retry: Callable[[Run], Callable[[int, float, Exception], None]],
    ) -> None:
        self.deps = deps
        self.calls = calls
        self.dispatch = dispatch
        self.on_error = on_error
        self.on_retry = on_retry

    async def run(self, run: Run, request: ModelRequest, step_log: StepLog, started: float) -> list[Call]:
        """Stream the response, running each call as soon as it is whole; the calls started."""
        names = request.metadata.get("tools")
        names = names if isinstance(names, ToolNames) else ToolNames()
        live = any(o.live for o in run.outputs.values())
        retries = 0
        while True:
            turn = _Turn(names, len(run.logs))
            run.live, run.output_open = None, False
            try:
                await self._read(run, request, turn, step_log, started, live)
            except ModelError as e:
                if turn.acted(run):
                    run.append(ErrorLog(message=f"model stream broke: {e}", where="model", step=run.step))
                    self._ended(run, turn, broken=True)
                    return turn.calls
                if isinstance(e, ContextTooLong) and self.deps.config.agent.compaction:
                    raise  # the step compacts the history and asks again
                if await self._again(run, e, turn, retries):
                    retries += 1
                    continue
                self._ended(run, turn, broken=True)
                return turn.calls
            self._ended(run, turn, broken=False)
            return turn.calls

    async def _read(
        self, run: Run, request: ModelRequest, turn: _Turn, step_log: StepLog, started: float, live: bool
    ) -> None:
        model = self.deps.model
        async with (
            self.deps.limits.llm_slot(),
            aclosing(
                stream_with_retry(
                    model.pick(run.route),
                    request,
                    model.retry_policy,
                    on_retry=self.on_retry(run),
                    on_error=model.on_error,
                )
            ) as chunks,
        ):
            first = True
            async for chunk in chunks:
                if isinstance(chunk, Usage):
                    step_log.prompt_tokens = chunk.prompt_tokens
                    step_log.completion_tokens = chunk.completion_tokens
                    step_log.model = chunk.model or ""
                    step_log.cached_tokens = chunk.cached_tokens
                    turn.finish_reason = chunk.finish_reason
                    continue
                if first:
                    first = False
                    step_log.llm_latency = time.monotonic() - started
                run.progress()
                if isinstance(chunk, ToolCallDelta):
                    self._piece(run, turn, chunk)
                elif chunk:
                    turn.text.append(chunk)
                    if live:
                        self.dispatch.partial(run, Partial("output", {}, chunk))

    def _piece(self, run: Run, turn: _Turn, d: ToolCallDelta) -> None:
        """A piece of a tool call: a new index means the call before it is whole: it runs now."""
        current = turn.pending
        if current is not None and d.index != current.index:
            turn.pending = None
            self._whole(run, turn, current)
            current = None
        if current is None:
            current = turn.pending = _Pending(d.index)
        if d.id and current.id is None:
            current.id = d.id
        if d.name:
            current.name = current.name + d.name if current.name and not current.arguments else d.name
        if d.arguments:
            current.arguments.append(d.arguments)

    def _target(self, turn: _Turn, name: str) -> ToolTarget:
        return turn.names.targets.get(name) or ToolTarget("action", name)

    def _whole(self, run: Run, turn: _Turn, call: _Pending) -> None:
        """A whole tool call: an action call started, or an output sent."""
        raw = self.deps.redactor.redact("".join(call.arguments))  # a secret the model writes is masked as it enters
        target = self._target(turn, call.name)
        # the model's own id goes back to it as given (some servers accept no other)
        tool_id = call.id or new_tool_call_id()
        if target.kind == "action":
            self.calls.start(run, Element("action_call", {"name": target.name}, raw), turn.calls, tool_call_id=tool_id)
            return
        try:
            args = json.loads(raw) if raw.strip() else {}
            if not isinstance(args, dict):
                raise ValueError("the arguments are not a JSON object")
        except ValueError as e:
            self._refuse_output(run, target.name, raw, f"its arguments are not a JSON object ({e})", tool_id)
            return
        content = args.pop("content", "")
        text = content if isinstance(content, str) else json.dumps(content)
        attrs = {k: v if isinstance(v, str) else json.dumps(v) for k, v in args.items()}
        self.dispatch.dispatch(run, target.name, text, attrs, tool_call_id=tool_id)
        run.feedback = True  # a tool call is answered: the model sees "sent" (or why not) next step

    def _refuse_output(self, run: Run, otype: str, raw: str, why: str, tool_call_id: str) -> None:
        error = f"output {otype!r} (tool {'output_' + otype!r}) was not sent: {why}"
        entry = OutputLog(type=otype, content=raw, error=error, step=run.step, tool_call_id=tool_call_id)
        run.append(entry)
        run.feedback = True
        run.append(ErrorLog(message=error, where="output", step=run.step))

    def _ended(self, run: Run, turn: _Turn, *, broken: bool) -> None:
        """What the response left: the last call run if whole, else reported and never run;
        a cut reported; the text delivered as the reply (marked when it was cut)."""
        cut = turn.finish_reason == "length"
        if cut:
            run.append(
                ErrorLog(message="the response was cut off at the model's token limit", where="model", step=run.step)
            )
        last, turn.pending = turn.pending, None
        if last is not None:
            if not broken and turn.finish_reason in _WHOLE:
                self._whole(run, turn, last)
            else:
                self._cut_off(run, turn, last)
        text = self.deps.redactor.redact("".join(turn.text))
        ended_early = cut or broken or turn.finish_reason is None
        if run.output_open and self.dispatch.close_live(run, Element("output", {}, text, closed=not ended_early)):
            return
        if text.strip():
            self.dispatch.dispatch(run, None, text, {}, cut_off=cut or broken)

    def _cut_off(self, run: Run, turn: _Turn, call: _Pending) -> None:
        """A tool call the response ended inside: it never runs; the model is told."""
        raw = self.deps.redactor.redact("".join(call.arguments))
        target = self._target(turn, call.name)
        run.append(
            ErrorLog(
                message=f"tool call {call.name!r} was not whole at the end of the response",
                where="model",
                step=run.step,
            )
        )
        tool_id = call.id or new_tool_call_id()
        if target.kind == "action":
            element = Element("action_call", {"name": target.name}, raw, closed=False)
            self.calls.cut_off(run, element, turn.calls, tool_call_id=tool_id)
        else:
            why = "the response ended inside the call: call it again, whole"
            self._refuse_output(run, target.name, raw, why, tool_id)

    async def _again(self, run: Run, e: ModelError, turn: _Turn, retries: int) -> bool:
        """A stream that broke before anything acted: True to ask again (a retryable error
        within the policy, or ``on_error`` said retry), False to go on with what was read;
        raises ``e`` to fail the run (``on_error`` said abort, or there is none)."""
        policy = self.deps.model.retry_policy
        dropped = sum(len(t) for t in turn.text) + (sum(len(a) for a in turn.pending.arguments) if turn.pending else 0)
        if e.retryable and retries < policy.max_retries:
            delay = policy.delay(retries)
            run.append(
                ErrorLog(
                    message=f"model stream broke before anything acted ({e}); asking again in {delay:.2f}s, "
                    f"{dropped} characters of the broken response dropped",
                    where="model",
                    step=run.step,
                )
            )
            run.progress()
            await asyncio.sleep(delay)
            return True
        decision = await self.on_error(run, e)
        if decision == "retry" and retries < policy.max_retries:
            run.append(
                ErrorLog(message=f"{e}; retrying as on_error decided, {dropped} characters dropped", where="model")
            )
            return True
        if decision == "continue":
            run.append(ErrorLog(message=f"{e}; {dropped} characters dropped", where="model", step=run.step))
            turn.text.clear()  # what a broken attempt wrote is dropped, as it says
            turn.pending = None
            return False
        raise e

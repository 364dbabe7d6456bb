"""Child runs: a run starts a run in another context instance, and awaits its result or not.

Two built-in actions, offered to a run only when its persona lists ``child_runs`` (globs of
``TYPE:KEY`` instances it may start runs in; by default none, so a model can never reach an
arbitrary conversation):

- ``startRun {"context": "TYPE:KEY", "input": ..., "wait": true}``: sends ``input`` to that
  context as a ``child`` input. With ``wait`` it returns the child's terminal state and
  outputs; without, its run id at once.
- ``waitRun {"run_id": "..."}``: awaits a child this run started without waiting.

The child's run row names its parent (``parent_id``); ``hub trace`` shows the tree. Children
live within their parent: when a parent ends, its children still running are stopped and
recorded ``killed`` with reason ``orphaned`` (and a child whose parent ended before it
started is killed the same way). A run may not start a child in its own context or an
ancestor's (it would wait on itself), nor nest deeper than `MAX_DEPTH`.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from ..definitions import Action, Context, Conversation, Extension, RunContext, RunResult, StopRun
from ..engine import Plugin, Runner, Submission
from ..errors import ActionError, RunError
from ..personas import Persona
from ..store import RunRecord, RunState

Submit = Callable[..., Awaitable[Submission]]
Resolve = Callable[[str], tuple[Context, Any, str]]
PersonaFor = Callable[[Conversation], Persona | None]

__all__ = ["ChildRuns", "StartRunArgs", "WaitRunArgs", "MAX_DEPTH", "ORPHANED"]

log = logging.getLogger("hub.features")

MAX_DEPTH = 4
"""How deep runs may nest: a top-level run is depth 0, its children depth 1, ..."""

ORPHANED = "orphaned"


class StartRunArgs(BaseModel):
    context: str = Field(description="the context instance to run in, TYPE:KEY (e.g. 'twitter:account:bot')")
    input: Any = Field(description="what the child run gets as its input: text, or a JSON object")
    wait: bool = Field(True, description="wait for the child's result (false: get its run id at once)")


class WaitRunArgs(BaseModel):
    run_id: str = Field(description="the run id startRun returned")


@dataclass(slots=True)
class _Live:
    """A run in progress, as the child-run rules need to see it."""

    run: RunRecord
    context: str
    ctx: RunContext
    started: dict[str, Submission] = field(default_factory=dict)  # children this run started


def summary(result: RunResult) -> dict[str, Any]:
    """What the parent's model sees of a finished child."""
    return {
        "run_id": result.run_id,
        "context": result.context,
        "state": str(result.state),
        "reason": result.reason,
        "outputs": [{"type": o.type, "content": o.content} for o in result.outputs if o.sent],
    }


class ChildRuns(Plugin):
    """The child-run actions and the orphan rule: a plugin (``before_run``, ``after_run``).

    Args:
        submit: The hub's ``submit`` (a child run is an input like any other).
        resolve: The hub's ``resolve_context`` (``TYPE:KEY`` to a definition, args and key).
        persona_for: Which persona a conversation has (it lists where child runs may go).
        runner: Whether the hub still takes input (on shutdown it stops every run itself).
        run_timeout: Seconds a child run may take (the actions' timeout).
        heartbeat_timeout: The parent's heartbeat; waiting on a child reports progress.
    """

    name = "child_runs"

    def __init__(
        self,
        *,
        submit: Submit,
        resolve: Resolve,
        persona_for: PersonaFor,
        runner: Runner,
        run_timeout: float,
        heartbeat_timeout: float,
    ) -> None:
        self._submit = submit
        self._resolve = resolve
        self._persona_for = persona_for
        self._runner = runner
        self._heartbeat = heartbeat_timeout
        self._live: dict[str, _Live] = {}
        timeout = run_timeout
        self.actions = [
            Action(
                name="startRun",
                handler=self._start_run,
                schema=StartRunArgs,
                description="Start a run in another conversation or persona (a child run of this one).",
                instructions=(
                    "Use it to hand work to another context. With wait=true you get the child's state "
                    "and outputs; with wait=false its run_id, to pass to waitRun later. A child still "
                    "running when this run ends is stopped."
                ),
                enabled=self._enabled,
                timeout=timeout,
            ),
            Action(
                name="waitRun",
                handler=self._wait_run,
                schema=WaitRunArgs,
                description="Wait for a child run started with wait=false; returns its state and outputs.",
                enabled=self._enabled,
                timeout=timeout,
            ),
        ]

    def extension(self) -> Extension:
        return Extension(name="hub", actions=self.actions, description="Built-in actions: child runs.")

    # --- policy -------------------------------------------------------------------------

    def _allowed(self, ctx: RunContext) -> list[str]:
        persona = self._persona_for(ctx.context)
        return list(persona.child_runs) if persona is not None else []

    def _enabled(self, ctx: RunContext) -> bool:
        return bool(self._allowed(ctx))

    def _lineage(self, ctx: RunContext) -> list[str]:
        """The contexts of this run and of its running ancestors, nearest first."""
        chain = [ctx.context.id]
        parent = ctx.run.parent_id
        while parent is not None and parent in self._live and len(chain) <= MAX_DEPTH + 1:
            live = self._live[parent]
            chain.append(live.context)
            parent = live.run.parent_id
        return chain

    # --- the actions --------------------------------------------------------------------

    async def _start_run(self, args: StartRunArgs, ctx: RunContext) -> dict[str, Any]:
        try:
            definition, _, key = self._resolve(args.context)
        except RunError as e:
            raise ActionError("startRun", str(e)) from e
        target = f"{definition.type}:{key}"
        allowed = self._allowed(ctx)
        if not any(fnmatch.fnmatchcase(target, pattern) for pattern in allowed):
            allowed_text = ", ".join(allowed)
            raise ActionError("startRun", f"{target} is not a context this persona may start runs in ({allowed_text})")
        lineage = self._lineage(ctx)
        if target in lineage:
            raise ActionError(
                "startRun", f"{target} is this run's context or an ancestor's: the child would wait on itself"
            )
        if len(lineage) > MAX_DEPTH:
            raise ActionError("startRun", f"runs may nest {MAX_DEPTH} deep at most")
        sub = await self._submit(
            target,
            data=args.input,
            type="child",
            user=ctx.run.user,
            parent_id=ctx.run.id,
            meta={"parent_context": ctx.context.id},
        )
        waiting: set[asyncio.Future[Any]] = {sub.run_id, sub.result}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        run_id = sub.taken_by()  # never a bare .result(): either future may have been cancelled
        if run_id is None:
            ended = sub.ended()
            if ended is not None:  # answered without a run of its own (a failure before it started)
                return summary(ended)
            if sub.duplicate:
                raise ActionError("startRun", f"the input to {target} was taken over by another worker")
            raise ActionError("startRun", f"the run in {target} was cancelled before it started")
        live = self._live.get(ctx.run.id)
        if live is not None:
            live.started[run_id] = sub
        if not args.wait:
            return {"run_id": run_id, "context": target, "state": "running"}
        return await self._result(sub, target, ctx)

    async def _wait_run(self, args: WaitRunArgs, ctx: RunContext) -> dict[str, Any]:
        live = self._live.get(ctx.run.id)
        sub = live.started.get(args.run_id) if live is not None else None
        if sub is None:
            raise ActionError("waitRun", f"{args.run_id!r} is not a run this run started")
        return await self._result(sub, sub.context, ctx)

    async def _result(self, sub: Submission, target: str, ctx: RunContext) -> dict[str, Any]:
        beat = max(0.5, self._heartbeat / 3)
        try:
            while not sub.result.done():  # a long child is progress, not a stall of its parent
                await asyncio.wait({sub.result}, timeout=beat)
                ctx.progress()
            result = await sub.wait()
        except asyncio.CancelledError:
            if sub.result.cancelled():  # the child's run was cancelled, not this call
                raise ActionError("startRun", f"the run in {target} was cancelled (the hub is stopping)") from None
            raise
        return summary(result)

    # --- the orphan rule ----------------------------------------------------------------

    async def before_run(self, ctx: RunContext) -> None:
        run = ctx.run
        if run.parent_id is not None and run.parent_id not in self._live:
            # its parent ended (or died with the process) before this child started
            raise StopRun(RunState.KILLED, ORPHANED)
        self._live[run.id] = _Live(run, ctx.context.id, ctx)

    async def after_run(self, result: RunResult, ctx: RunContext | None) -> None:
        self._live.pop(result.run_id, None)
        if not self._runner.accepting:
            return  # shutting down: the runner stops every run itself
        for live in list(self._live.values()):
            child = live.run
            if child.parent_id == result.run_id and child.state == RunState.RUNNING and child.ended is None:
                log.warning("run %s: parent %s ended; stopping it (%s)", child.id[:8], result.run_id[:8], ORPHANED)
                live.ctx.stop(RunState.KILLED, ORPHANED)

"""Action calls: validation, templates, action memory and execution.

An ``<action_call>`` is started as soon as its closing tag arrives, concurrently with the
others of the response unless they share a ``queue``. Its result, or its error, is what the
model sees in its next step. An argument whose whole value is ``{{calls[N].path}}`` waits for
that earlier call of the same response and takes its result.

Action memory (``memory="name"``) is kept per conversation (``scope="global"``: one value
shared by every conversation), and updates to one key are serialised: the value is read,
the handler runs and the value is written back under one lock.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from ..definitions import RunContext, StopRun, plain_json, store_reason, validation_message
from ..errors import ActionError, RetryAction, StoreError
from ..logs import ActionCallLog, ActionResultLog, jsonable
from ..protocol import Element
from ..store import RunState
from ._active_run import ERROR_RETRIES

if TYPE_CHECKING:
    from ..definitions import Action
    from ._active_run import Run
    from ._deps import EngineDeps

__all__ = ["ActionCalls", "ActionMemory", "Call"]

log = logging.getLogger("hub.engine")

_TEMPLATE = re.compile(r"^\{\{\s*calls\[(\d+)\]((?:\.[A-Za-z_][\w-]*|\[\d+\])*)\s*\}\}$")
_PATH_PART = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]")


@dataclass(slots=True)
class Call:
    """One action call of a response: its log entry, its result to come, its task."""

    log: ActionCallLog
    done: asyncio.Future[Any]
    task: asyncio.Task[None] | None = None


class ActionMemory:
    """Where an action's memory lives, and one lock per key so that updates never race."""

    def __init__(self, deps: EngineDeps) -> None:
        self.deps = deps
        self._locks: dict[str, asyncio.Lock] = {}

    @staticmethod
    def key(action: Action, ctx: RunContext) -> str:
        """``action:NAME:CONTEXT`` per conversation, ``action:NAME`` when the action says global."""
        assert action.memory is not None
        if action.scope == "global":
            return f"action:{action.memory}"
        return f"action:{action.memory}:{ctx.context.id}"

    @asynccontextmanager
    async def hold(self, action: Action, ctx: RunContext) -> AsyncIterator[None]:
        """Load ``ctx.action_memory``, let the caller run the handler, then save it, as one
        update: a second call on the same key waits until the first one is saved. Another
        process on the same store (a worker; ``scope="global"`` memory is shared by all) may
        save the key meanwhile: this call's change is merged onto it, never written over it."""
        key = self.key(action, ctx)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        store = self.deps.memory
        try:
            async with lock:
                ctx.action_memory, version = await store.get_versioned(key)
                base = plain_json(ctx.action_memory)
                yield
                value = plain_json(ctx.action_memory)  # TypeError: not JSON, as store.set says
                if value != base:  # unchanged: nothing to write over what others saved
                    await store.save_merged(key, value, base=base, version=version, counters=action.counter_paths)
        finally:
            if not lock.locked() and not lock._waiters and self._locks.get(key) is lock:
                del self._locks[key]  # no one else is waiting: do not keep a lock per key forever


class ActionCalls:
    """Starts and runs the action calls of a run's responses."""

    def __init__(self, deps: EngineDeps) -> None:
        self.deps = deps
        self.memory = ActionMemory(deps)

    def start(self, run: Run, el: Element, calls: list[Call], *, tool_call_id: str | None = None) -> None:
        """A closed ``<action_call>``: log it and start it (or log why it cannot run).
        ``tool_call_id``: the tools style's id of the call, kept with it."""
        name = el.attrs.get("name", "").strip()
        raw = el.content.strip()
        try:
            args: Any = json.loads(raw) if raw else {}
        except json.JSONDecodeError as e:
            args = raw
            error: str | None = f"arguments are not valid JSON ({e.msg} at position {e.pos})"
        else:
            error = None
        call = ActionCallLog(name=name, args=args, index=len(calls), step=run.step, tool_call_id=tool_call_id)
        run.append(call)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        entry = Call(call, fut)
        calls.append(entry)
        action = run.actions.get(name)
        if error is None and action is None:
            known = ", ".join(sorted(run.actions)) or "none"
            error = f"unknown action {name!r}; available: {known}" if name else "action_call without a name attribute"
        if error is not None:
            self.refuse(run, entry, error)
            return
        assert action is not None
        entry.task = asyncio.create_task(self._run(run, action, call, fut, calls), name=f"action:{name}")
        run.tasks.add(entry.task)
        entry.task.add_done_callback(run.tasks.discard)

    def cut_off(self, run: Run, el: Element, calls: list[Call], *, tool_call_id: str | None = None) -> None:
        """An ``<action_call>`` the stream ended inside: it never runs; the model is told."""
        name = el.attrs.get("name", "").strip()
        call = ActionCallLog(name=name, args=el.content, index=len(calls), step=run.step, tool_call_id=tool_call_id)
        run.append(call)
        entry = Call(call, asyncio.get_running_loop().create_future())
        calls.append(entry)
        self.refuse(
            run,
            entry,
            "the response ended before </action_call>: the call was cut off and did not run; call it again, whole",
        )

    def refuse(self, run: Run, entry: Call, error: str) -> None:
        self.result(run, entry.log, ok=False, error=error)
        entry.done.set_exception(ActionError(entry.log.name, error))
        entry.done.exception()  # retrieved: a later template reference reports it

    async def _run(
        self, run: Run, action: Action, call: ActionCallLog, fut: asyncio.Future[Any], calls: list[Call]
    ) -> None:
        """One call: its arguments, the plugins' permission, the handler (with the action's
        memory), its result checked and recorded; ``fut`` tells later calls' templates."""
        started = time.monotonic()
        assert run.ctx is not None
        tries = 0
        try:
            while True:
                try:
                    args = await self._arguments(action, call, calls)
                    ctx = run.ctx.derive(call=call)
                    if await self._denied(run, action, call, fut, ctx, started):
                        return
                    result = await self._handle(action, args, ctx)
                    data = await self._result_data(run, action, result)
                except (StopRun, asyncio.CancelledError):
                    raise
                except Exception as e:
                    if await self._after_error(run, action, call, fut, e, started, tries):
                        tries += 1
                        continue
                    return
                self.result(run, call, ok=True, data=data, started=started)
                fut.set_result(data)
                if action.on_success is not None:
                    await _maybe_await(action.on_success(result, ctx))
                return
        except StopRun as e:
            run.slot.stop_with(e, run.id)  # ends the whole run, not only this call
        except asyncio.CancelledError:
            if not fut.done():
                fut.cancel()
            raise
        except StoreError as e:  # the store failed after the result was recorded: the run fails
            self._store_failed(run, e)
        except Exception as e:
            await self._failed(run, action, call, fut, e, started)
        finally:
            if not fut.done():  # whatever happened, a template waiting on this call is told
                fut.set_exception(ActionError(action.name, "the call did not finish"))
                fut.exception()
            run.progress()

    async def _after_error(
        self,
        run: Run,
        action: Action,
        call: ActionCallLog,
        fut: asyncio.Future[Any],
        e: Exception,
        started: float,
        tries: int,
    ) -> bool:
        """A call that failed, shown to the context's ``on_error``: True to run it again
        ("retry", at most ``ERROR_RETRIES`` times; past that it aborts). "continue" (the default) gives the model
        the error as its result; "abort" does so and fails the run. A store error (the
        hub's store, not the action) fails the run unless ``on_error`` says otherwise."""
        store = isinstance(e, StoreError)
        try:
            decision = await run.on_error(e, default="abort" if store else "continue")
        except Exception as hook_error:
            log.exception("run %s: on_error hook failed", run.id)
            await self._failed(run, action, call, fut, e, started)
            run.stop(RunState.FAILED, f"internal error: {type(hook_error).__name__}: {hook_error}")
            return False
        if decision == "retry":
            if tries < ERROR_RETRIES:
                log.info("run %s: action %s failed (%s); retrying as on_error decided", run.id, action.name, e)
                return True
            decision = "abort"  # as for the model's errors: a retry past the bound aborts
        if store and decision != "continue":
            self._store_failed(run, e)  # type: ignore[arg-type]
            return False
        await self._failed(run, action, call, fut, e, started)
        if decision == "abort":
            message = (
                str(e) if isinstance(e, ActionError) else f"action {action.name!r} failed: {type(e).__name__}: {e}"
            )
            run.stop(RunState.FAILED, f"{message} (on_error aborted the run)")
        return False

    @staticmethod
    def _store_failed(run: Run, e: StoreError) -> None:
        """The hub's store failed, not the action: the run fails (its inputs are retried)."""
        reason = store_reason(e)
        log.error("run %s: %s", run.id, reason)
        run.stop(RunState.FAILED, reason, store_failure=e)

    @staticmethod
    async def _arguments(action: Action, call: ActionCallLog, calls: list[Call]) -> Any:
        """The call's arguments, each ``{{calls[N]}}`` template resolved, checked against the
        action's schema (`Action.parse_arguments()`: a JSON schema for an MCP tool)."""
        raw = await resolve_templates(call.args, calls[: call.index], call.index)
        return action.parse_arguments(raw)

    async def _denied(
        self, run: Run, action: Action, call: ActionCallLog, fut: asyncio.Future[Any], ctx: RunContext, started: float
    ) -> bool:
        """Whether a plugin (the role guard) denies the call: recorded as denied; a critical
        action's denial ends the run as ``rejected``."""
        denial = await self.deps.plugins.authorize(action, ctx)
        if denial is None:
            return False
        self.result(run, call, ok=False, error=denial, denied=True, started=started)
        fut.set_exception(ActionError(action.name, denial))
        fut.exception()
        if action.critical:
            raise StopRun(RunState.REJECTED, f"denied: {denial}")
        return True

    async def _handle(self, action: Action, args: BaseModel, ctx: RunContext) -> Any:
        """The handler, holding the action's memory around it when it has one."""
        if action.memory:
            async with self.memory.hold(action, ctx):
                return await self.invoke(action, args, ctx)
        return await self.invoke(action, args, ctx)

    @staticmethod
    async def _result_data(run: Run, action: Action, result: Any) -> Any:
        """The result as the model sees it, checked against the action's ``returns`` schema
        (the model sees which field is wrong); a file it returns (hub.Media) stays with the
        run, and its result shows a handle."""
        try:
            action.check_result(result)
        except ValidationError as e:
            raise ActionError(
                action.name, "its result does not match its returns schema: " + validation_message(e)
            ) from e
        return jsonable(await run.media.stash(result))

    async def _failed(
        self, run: Run, action: Action, call: ActionCallLog, fut: asyncio.Future[Any], e: Exception, started: float
    ) -> None:
        """The call failed (its handler, its arguments, its result): the model sees why in its
        next step, and the action's ``on_error`` is told."""
        message = str(e) if isinstance(e, ActionError) else f"action {action.name!r} failed: {type(e).__name__}: {e}"
        if not isinstance(e, ActionError):
            log.warning("run %s: %s", run.id, message, exc_info=e)
        self.result(run, call, ok=False, error=message, started=started)
        if not fut.done():
            fut.set_exception(e if isinstance(e, ActionError) else ActionError(action.name, message))
            fut.exception()
        if action.on_error is not None:
            assert run.ctx is not None
            try:
                await _maybe_await(action.on_error(e, run.ctx.derive(call=call)))
            except Exception:
                log.exception("on_error hook of action %s failed", action.name)

    async def invoke(self, action: Action, args: BaseModel, ctx: RunContext) -> Any:
        """The handler, under its queue, with its timeout and its bounded retries: with
        ``retry=N`` a handler that raises (anything but an ``ActionError``, its deliberate
        answer to the model) or times out is tried up to N more times, with a backoff."""
        timeout = action.timeout or self.deps.config.agent.action_timeout
        lock = self.deps.limits.queue_lock(action.queue) if action.queue else None
        attempt = 0
        while True:
            try:
                if lock is not None:
                    async with lock:
                        return await asyncio.wait_for(action.handler(args, ctx), timeout)
                return await asyncio.wait_for(action.handler(args, ctx), timeout)
            except ActionError:
                raise
            except RetryAction as e:
                if attempt >= action.retry:
                    raise ActionError(action.name, f"gave up after {attempt + 1} attempts: {e}") from e
            except TimeoutError as e:
                if attempt >= action.retry:
                    raise ActionError(action.name, f"timed out after {timeout:g}s") from e
            except Exception as e:
                if attempt >= action.retry:
                    if attempt == 0:
                        raise
                    log.warning("action %s failed after %d attempts", action.name, attempt + 1, exc_info=e)
                    raise ActionError(
                        action.name, f"failed after {attempt + 1} attempts: {type(e).__name__}: {e}"
                    ) from e
                log.info(
                    "action %s: attempt %d failed (%s: %s); trying again", action.name, attempt + 1, type(e).__name__, e
                )
            attempt += 1
            await asyncio.sleep(min(5.0, 0.2 * 2**attempt))

    def result(
        self,
        run: Run,
        call: ActionCallLog,
        *,
        ok: bool,
        data: Any = None,
        error: str | None = None,
        denied: bool = False,
        started: float | None = None,
    ) -> None:
        run.append(
            ActionResultLog(
                call_id=call.id,
                name=call.name,
                ok=ok,
                data=self.deps.redactor.redact_tree(data),  # masked as it enters the run
                error=self.deps.redactor.redact(error) if error else error,
                denied=denied,
                step=run.step,
                duration=(time.monotonic() - started) if started else 0.0,
            )
        )


async def resolve_templates(value: Any, earlier: list[Call], index: int) -> Any:
    """``value`` with each ``{{calls[N].path}}`` replaced by that earlier call's result."""
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
        return {k: await resolve_templates(v, earlier, index) for k, v in value.items()}
    if isinstance(value, list):
        return [await resolve_templates(v, earlier, index) for v in value]
    return value


async def _maybe_await(res: Any) -> None:
    if asyncio.iscoroutine(res):
        await res

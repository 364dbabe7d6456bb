"""A context's ``on_error`` sees every error of its runs, not only the model's: an action's,
a hook's and the store's. It decides: "continue", "retry" (bounded) or "abort"."""

from __future__ import annotations

from typing import Any

import pytest

from hub import Context, Extension, NoArgs, action, output
from hub.errors import StoreError
from hub.logs import ActionResultLog, ErrorLog
from hub.store import RunState

from .faults import FunctionModel, send_bounded

CALL = '<response><action_call name="tool">{}</action_call></response>'
SAY = '<response><output type="t:say">done</output></response>'


def script(request: Any) -> str:
    said = "".join(m["content"] for m in request.messages)
    return SAY if "<action_result" in said or "no-tool" in said else CALL


class Rig:
    """A `t:chat` context whose ``where`` (the action, on_step, on_run) raises ``error`` the
    first ``fails`` times; its ``on_error`` records what it saw and answers ``decision``."""

    def __init__(self, where: str, error: Exception, decision: str, fails: int = 100) -> None:
        self.where, self.error, self.decision, self.fails = where, error, decision, fails
        self.seen: list[str] = []
        self.calls = 0
        self.said: list[str] = []

    def _maybe_raise(self, where: str) -> None:
        if where == self.where:
            self.calls += 1
            if self.calls <= self.fails:
                raise self.error

    def extension(self) -> Extension:
        @action(name="tool")
        async def tool(args: NoArgs, ctx: Any) -> str:
            self._maybe_raise("action")
            return "tool ok"

        @output(type="t:say")
        async def say(content: str, ctx: Any) -> None:
            self.said.append(content)

        def on_error(e: BaseException, ctx: Any) -> str:
            self.seen.append(f"{type(e).__name__}: {e}")
            return self.decision

        chat = Context(
            type="t:chat",
            actions=[tool],
            outputs=[say],
            reply_output="t:say",
            on_step=lambda ctx: self._maybe_raise("on_step"),
            on_run=lambda ctx: self._maybe_raise("on_run"),
            on_error=on_error,
        )
        return Extension("t", contexts=[chat])


def results(result: Any) -> list[ActionResultLog]:
    return [e for e in result.logs if isinstance(e, ActionResultLog)]


@pytest.mark.parametrize(
    ("error", "decision", "fails", "state", "calls", "ok"),
    [
        (RuntimeError("injected"), "continue", 100, RunState.COMPLETED, 1, False),
        (RuntimeError("injected"), "retry", 2, RunState.COMPLETED, 3, True),  # two retries, then it worked
        (RuntimeError("injected"), "retry", 100, RunState.FAILED, 3, False),  # bounded: past it, abort
        (RuntimeError("injected"), "abort", 100, RunState.FAILED, 1, False),
        (StoreError("injected: disk I/O error"), "continue", 100, RunState.COMPLETED, 1, False),
        (StoreError("injected: disk I/O error"), "abort", 100, RunState.FAILED, 1, False),
    ],
)
async def test_an_action_error_reaches_on_error(
    make_hub: Any, error: Exception, decision: str, fails: int, state: RunState, calls: int, ok: bool
) -> None:
    rig = Rig("action", error, decision, fails)
    async with make_hub(FunctionModel(script), rig.extension()) as hub:
        result = await send_bounded(hub, "t:chat:ann", None, "go")
    assert result.state == state, result.reason
    assert rig.calls == calls
    assert rig.seen == [f"{type(error).__name__}: {error}"] * min(calls, rig.fails)
    if isinstance(error, StoreError) and decision == "abort":
        # the hub's store failed the run: no result, the input waits for the store
        assert results(result) == [] and result.store_failure is not None
        return
    (got,) = results(result)  # one result for the call, whatever the attempts
    assert got.ok is ok
    if state == RunState.FAILED:
        assert "injected" in (result.reason or "")
        assert rig.said == []  # aborted: the model was not asked again
    else:
        assert rig.said == ["done"]


@pytest.mark.parametrize(
    ("where", "decision", "state", "reason"),
    [
        ("on_step", "continue", RunState.COMPLETED, None),
        ("on_step", "abort", RunState.FAILED, "internal error: RuntimeError: injected"),
        ("on_run", "continue", RunState.COMPLETED, None),
        ("on_run", "abort", RunState.FAILED, "on_run hook failed: RuntimeError: injected (on_error aborted the run)"),
    ],
)
async def test_a_hook_error_reaches_on_error(
    make_hub: Any, where: str, decision: str, state: RunState, reason: str | None
) -> None:
    rig = Rig(where, RuntimeError("injected"), decision)
    async with make_hub(FunctionModel(script), rig.extension()) as hub:
        result = await send_bounded(hub, "t:chat:ann", None, "no-tool")
    assert (result.state, result.reason) == (state, reason)
    assert rig.seen and set(rig.seen) == {"RuntimeError: injected"}
    assert any(isinstance(e, ErrorLog) and f"{where} hook failed" in e.message for e in result.logs) or (
        state == RunState.FAILED and where == "on_step"
    )


async def test_a_hook_error_retried_as_on_error_decides(make_hub: Any) -> None:
    rig = Rig("on_step", RuntimeError("injected"), "retry", fails=1)
    async with make_hub(FunctionModel(script), rig.extension()) as hub:
        result = await send_bounded(hub, "t:chat:ann", None, "no-tool")
    assert (result.state, result.reason) == (RunState.COMPLETED, None)
    assert rig.seen == ["RuntimeError: injected"] and rig.calls == 2 and rig.said == ["done"]


async def test_a_store_error_that_fails_the_run_reaches_on_error(make_hub: Any) -> None:
    """The step's store write fails for good: on_error is told; the run fails all the same,
    and its input is not marked done (a run once the store is back answers it)."""
    rig = Rig("nowhere", RuntimeError("unused"), "continue")
    async with make_hub(FunctionModel(script), rig.extension()) as hub:
        real = hub.runs.sync
        failing = True

        async def sync() -> None:
            if failing:
                raise StoreError("injected: database is locked")
            await real()

        hub.runs.sync = sync  # type: ignore[method-assign]
        result = await send_bounded(hub, "t:chat:ann", None, "no-tool")
        failing = False
        assert result.state == RunState.FAILED and result.store_failure is not None
        assert rig.seen and all("database is locked" in s for s in rig.seen), rig.seen

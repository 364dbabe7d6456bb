"""An action with ``retry=N`` is tried up to N more times when its handler raises (anything
but an ``ActionError``, its answer to the model) or times out; the model sees the last
failure once the attempts are spent, and never a duplicate result."""

from __future__ import annotations

from typing import Any

import pytest

from hub import Context, Extension, RetryAction, action, output
from hub.errors import ActionError
from hub.logs import ActionResultLog
from hub.store import RunState

from .faults import FunctionModel, send_bounded

CALL = '<response><action_call name="flaky">{}</action_call></response>'
SAY = '<response><output type="t:say">done</output></response>'


def script(request: Any) -> str:
    said = "".join(m["content"] for m in request.messages)
    return SAY if "<action_result" in said else CALL


def flaky_extension(retry: int, fail: int, error: type[Exception], attempts: list[int]) -> Extension:
    """A `flaky` action whose first ``fail`` attempts raise ``error``."""

    @action(name="flaky", retry=retry)
    async def flaky(args: Any, ctx: Any) -> str:
        attempts.append(len(attempts) + 1)
        if len(attempts) <= fail:
            raise error("injected") if error is not ActionError else ActionError("flaky", "injected")
        return f"ok on attempt {len(attempts)}"

    @output(type="t:say")
    async def say(content: str, ctx: Any) -> None:
        pass

    chat = Context(type="t:chat", actions=[flaky], outputs=[say], reply_output="t:say")
    return Extension("t", contexts=[chat])


@pytest.mark.parametrize(
    ("retry", "fail", "error", "attempts", "ok", "seen"),
    [
        (2, 1, RuntimeError, 2, True, "ok on attempt 2"),
        (2, 2, OSError, 3, True, "ok on attempt 3"),
        (2, 5, RuntimeError, 3, False, "failed after 3 attempts: RuntimeError: injected"),
        (1, 5, RetryAction, 2, False, "gave up after 2 attempts: injected"),
        (0, 5, RuntimeError, 1, False, "action 'flaky' failed: RuntimeError: injected"),
        (3, 5, ActionError, 1, False, "action 'flaky': injected"),  # its answer to the model: not retried
    ],
)
async def test_retry_counts_ordinary_exceptions(
    make_hub: Any, retry: int, fail: int, error: type[Exception], attempts: int, ok: bool, seen: str
) -> None:
    made: list[int] = []
    hub = make_hub(FunctionModel(script), flaky_extension(retry, fail, error, made))
    async with hub:
        result = await send_bounded(hub, "t:chat:ann", None, "go")
    assert result.state == RunState.COMPLETED, result.reason
    assert made == list(range(1, attempts + 1))
    (got,) = [e for e in result.logs if isinstance(e, ActionResultLog)]  # one result, whatever the attempts
    assert got.ok is ok
    assert seen in (str(got.data) if ok else got.error or ""), got

"""The one ordered hook protocol: plugins are called in registration order; the first denial
or stop reason wins, yet every plugin sees each step; a failing on_output or after_run hook
is logged and never stops the others; a before_run that raises ends the run."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from hub import Extension, Hub, NoArgs, RunState, ScriptedModel, action
from hub.definitions import StopRun
from hub.engine import Plugin, Plugins


class Recorder(Plugin):
    def __init__(
        self, name: str, calls: list[str], *, deny: str | None = None, stop: str | None = None, fail: bool = False
    ) -> None:
        self.name, self.calls, self.deny, self.stop, self.fail = name, calls, deny, stop, fail

    async def before_run(self, run: Any) -> None:
        self.calls.append(f"{self.name}.before_run")

    async def authorize(self, action: Any, run: Any) -> str | None:
        self.calls.append(f"{self.name}.authorize")
        return self.deny

    def after_step(self, run: Any, step: Any) -> str | None:
        self.calls.append(f"{self.name}.after_step")
        return self.stop

    def on_output(self, run: Any, output: Any) -> None:
        self.calls.append(f"{self.name}.on_output")
        if self.fail:
            raise RuntimeError("on_output broke")

    async def after_run(self, result: Any, run: Any) -> None:
        self.calls.append(f"{self.name}.after_run")
        if self.fail:
            raise RuntimeError("after_run broke")


async def test_the_dispatcher_keeps_order_first_answer_wins_and_isolates_failures(caplog) -> None:
    calls: list[str] = []
    plugins = Plugins(
        [
            Recorder("a", calls, fail=True),
            Recorder("b", calls, deny="no", stop="limit"),
            Recorder("c", calls, deny="never seen", stop="other"),
        ]
    )
    assert await plugins.authorize(None, None) == "no"  # type: ignore[arg-type]
    assert calls == ["a.authorize", "b.authorize"]  # a denial ends the asking
    calls.clear()
    assert plugins.after_step(None, None) == "limit"  # type: ignore[arg-type]
    assert calls == ["a.after_step", "b.after_step", "c.after_step"]  # every plugin sees the step
    calls.clear()
    with caplog.at_level(logging.ERROR, logger="hub.engine"):
        plugins.on_output(None, None)  # type: ignore[arg-type]

        class Result:
            run_id = "r1"

        await plugins.after_run(Result(), None)  # type: ignore[arg-type]
    assert calls == ["a.on_output", "b.on_output", "c.on_output", "a.after_run", "b.after_run", "c.after_run"]
    assert "plugin a: on_output failed" in caplog.text and "plugin a: after_run failed for run r1" in caplog.text


@pytest.mark.parametrize("raised", [StopRun(RunState.KILLED, "no budget"), RuntimeError("plugin bug")])
async def test_a_plugin_added_to_a_hub_takes_part_in_its_runs(make_hub, raised: Exception) -> None:
    calls: list[str] = []

    @action(name="ping", description="Ping.")
    async def ping(args: NoArgs, ctx: Any) -> str:
        return "pong"

    model = ScriptedModel(
        ['<response><action_call name="ping">{}</action_call></response>', "<response><output>done</output></response>"]
    )

    class Raising(Plugin):
        armed = False

        async def before_run(self, run: Any) -> None:
            if self.armed:
                raise raised

    raising = Raising()
    hub: Hub = make_hub(model, Extension("t", actions=[ping]))
    hub.plugins.add(Recorder("p", calls))  # composition time: before the hub starts
    hub.plugins.add(raising)
    async with hub:
        result = await hub.send("cli:session", {"user": "ann"}, "hi")
        assert result is not None and result.ok
        assert calls == ["p.before_run", "p.authorize", "p.after_step", "p.on_output", "p.after_step", "p.after_run"]
        raising.armed = True
        ended = await hub.send("cli:session", {"user": "ann"}, "again")
    assert ended is not None and model.requests[2:] == []  # no model call once before_run raised
    if isinstance(raised, StopRun):
        assert (ended.state, ended.reason) == (RunState.KILLED, "no budget")
    else:
        assert ended.state == RunState.FAILED and "plugin bug" in (ended.reason or "")

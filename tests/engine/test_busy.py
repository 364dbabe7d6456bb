"""[agent] busy: what a message arriving during a run does. steer joins the run's next step;
queue gives it a run of its own after this one; collect answers all that arrived in one run
after it; interrupt stops the run (killed, "interrupted") and answers anew, with the stopped
run's message in the history."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hub import RunState
from hub.models import Model, ModelRequest
from hub.testing.postgres import temporary_schema


class Gated(Model):
    """Answers each request with its newest message's text echoed; the first request waits
    for ``release`` (the run is then in progress while the test sends more)."""

    name = "gated"

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:  # type: ignore[override]
        self.requests.append(request)
        if len(self.requests) == 1:
            self.entered.set()
            await self.gate.wait()
        yield "<response><output>ok</output></response>"


def inputs(result: Any) -> list[str]:
    return [e.content for e in result.logs if e.kind == "input"]


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, config: Any) -> AsyncIterator[str]:
    """Each mode on one SQLite hub and on a PostgreSQL worker (its conversation lock and claims)."""
    if request.param == "postgres":
        async with temporary_schema() as url:
            config.store.url = url
            yield url
        return
    yield ""


async def busy_run(make_hub: Any, config: Any, mode: str, *, persona: str | None = None) -> tuple[list[Any], Gated]:
    """m1 starts a run held on the model; m2 and m3 arrive during it; then it goes on."""
    config.agent.busy = mode
    if persona is not None:
        (config.contexts_dir / "default.toml").write_text(persona, encoding="utf-8")
    model = Gated()
    async with make_hub(model) as hub:
        first = await hub.submit("cli:session", {"user": "ann"}, "m1", user="ann")
        await model.entered.wait()
        later = [await hub.submit("cli:session", {"user": "ann"}, t, user="ann") for t in ("m2", "m3")]
        model.gate.set()
        results = [await s.wait() for s in (first, *later)]
    return results, model


async def test_steer_joins_the_runs_next_step(store: str, make_hub: Any, config: Any) -> None:
    results, model = await busy_run(make_hub, config, "steer")
    if store:  # workers: a run takes its inputs once, at its start (order across workers), as collect
        assert inputs(results[0]) == ["m1"] and inputs(results[1]) == ["m2", "m3"]
        return
    assert len({r.run_id for r in results}) == 1 and inputs(results[0]) == ["m1", "m2", "m3"]
    assert len(model.requests) == 2  # the second step saw the messages that arrived


async def test_queue_answers_each_in_a_run_of_its_own_in_turn(store: str, make_hub: Any, config: Any) -> None:
    results, model = await busy_run(make_hub, config, "queue")
    assert [inputs(r) for r in results] == [["m1"], ["m2"], ["m3"]]
    assert len({r.run_id for r in results}) == 3 and all(r.ok for r in results)
    assert len(model.requests) == 3


async def test_collect_answers_all_that_arrived_in_one_run_after(store: str, make_hub: Any, config: Any) -> None:
    results, model = await busy_run(make_hub, config, "collect")
    assert inputs(results[0]) == ["m1"] and inputs(results[1]) == inputs(results[2]) == ["m2", "m3"]
    assert results[1].run_id == results[2].run_id != results[0].run_id
    assert len(model.requests) == 2


async def test_interrupt_stops_the_run_and_answers_anew_with_everything(
    store: str, make_hub: Any, config: Any, out: Any
) -> None:
    results, model = await busy_run(make_hub, config, "interrupt")
    first, second, third = results
    assert (first.state, first.reason) == (RunState.KILLED, "interrupted") and inputs(first) == ["m1"]
    assert second.run_id == third.run_id and inputs(second) == ["m2", "m3"] and second.ok
    prompt = str(model.requests[-1].messages)
    assert "m1" in prompt and "m2" in prompt and "m3" in prompt  # the stopped run's message is in its history
    assert out.getvalue() == "ok\n"  # one answer; no failure reply for the interrupted run


async def test_a_personas_busy_wins_over_the_config(make_hub: Any, config: Any) -> None:
    persona = 'name = "Q"\ninstructions = "You answer in turn."\nbusy = "queue"\n'
    results, _ = await busy_run(make_hub, config, "steer", persona=persona)
    assert [inputs(r) for r in results] == [["m1"], ["m2"], ["m3"]]


async def test_a_routes_busy_wins_over_the_persona_and_the_config(make_hub: Any, config: Any) -> None:
    from hub.config import RouteSection

    persona = 'name = "Q"\ninstructions = "You take what came together."\nbusy = "collect"\n'
    config.routes = [RouteSection(match="cli:session:*", busy="queue")]
    results, _ = await busy_run(make_hub, config, "steer", persona=persona)
    assert [inputs(r) for r in results] == [["m1"], ["m2"], ["m3"]]


def test_an_unknown_mode_is_refused_naming_the_key() -> None:
    from hub import ConfigError
    from hub.config import config_from_dict

    with pytest.raises(ConfigError, match="agent.busy"):
        config_from_dict({"agent": {"busy": "wait"}})

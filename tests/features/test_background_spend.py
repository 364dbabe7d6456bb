"""Background spend (issue 41, item 5): schedules, reminders, webhooks and child runs draw
on ``[limits] background_cost_per_day``, apart from conversations; once it is spent they are
skipped (a log line, a metric, no model call) until the next UTC day. A schedule with
``skip_unchanged = true`` does not call the model when nothing changed since its last run."""

from __future__ import annotations

import logging

import pytest

from hub import Hub, HubConfig, ScriptedModel
from hub.config import ScheduleSection
from hub.features import BACKGROUND_SCOPE
from hub.store import RunState
from tests._support.chat import Said
from tests._support.clock import FakeClock

ROOM = "test:chat:room"
ANSWER = "<response><output>" + "done " * 40 + "</output></response>"


def skipped(hub: Hub, trigger: str) -> float:
    return hub.metrics.registry.get_sample_value("hub_background_skipped_total", {"trigger": trigger}) or 0.0


def priced(config: HubConfig, limit: float) -> None:
    config.model.price_input = 1000.0  # money per million tokens: a turn costs about 0.1
    config.model.price_output = 1000.0
    config.limits.background_cost_per_day = limit


@pytest.mark.parametrize("trigger", ["schedule", "webhook", "reminder"])
async def test_spent_background_runs_are_skipped_until_the_next_day_and_conversations_go_on(
    config: HubConfig, make_chat_hub, said: Said, caplog: pytest.LogCaptureFixture, trigger: str
) -> None:
    priced(config, 0.05)
    hub = make_chat_hub([ANSWER] * 4)
    model: ScriptedModel = hub.model  # type: ignore[assignment]
    days = iter(["2026-12-01"] * 2 + ["2026-12-02"] * 10)  # asked once per background run
    hub.background.today = lambda: next(days)
    async with hub:
        first = await hub.send(ROOM, data="the nightly report", type=trigger)
        assert first.state == RunState.COMPLETED
        spent = await hub.background.spent("2026-12-01")
        assert spent > 0.05, "the first run spent the day's background budget"
        asked = len(model.requests)
        with caplog.at_level(logging.WARNING, logger="hub.features"):
            second = await hub.send(ROOM, data="the nightly report", type=trigger)
        assert (second.state, second.reason) == (RunState.KILLED, "background_cost_per_day (0.05)")
        assert len(model.requests) == asked, "a skipped run never calls the model"
        assert skipped(hub, trigger) == 1
        assert any(
            "is skipped" in r.getMessage() and "background_cost_per_day" in r.getMessage() for r in caplog.records
        )
        # a conversation is not a background run: it goes on
        talk = await hub.send(ROOM, data="hello", user="ann")
        assert talk.state == RunState.COMPLETED
        # nobody is told of a skipped background run (no limit reply, no failure reply)
        assert all("limit" not in text and "wrong" not in text for _, text in said.items)
        # the next UTC day starts from zero
        third = await hub.send(ROOM, data="the nightly report", type=trigger)
        assert third.state == RunState.COMPLETED
        assert await hub.background.store.cost(BACKGROUND_SCOPE, "2026-12-02") == pytest.approx(
            (await hub.runs.get(third.run_id)).cost  # type: ignore[union-attr]
        ), "the hold was given back: the day holds what the run spent"


async def test_a_hold_keeps_a_run_from_starting_when_the_rest_would_not_pay_for_it(
    config: HubConfig, make_chat_hub
) -> None:
    priced(config, 1.0)
    hub = make_chat_hub([ANSWER] * 20)
    async with hub:
        costs = []
        states = []
        for _ in range(20):
            r = await hub.send(ROOM, data="tick", type="schedule")
            states.append(r.state)
            costs.append((await hub.runs.get(r.run_id)).cost)  # type: ignore[union-attr]
        assert RunState.KILLED in states
        ran = [c for c, s in zip(costs, states, strict=True) if s == RunState.COMPLETED]
        # admitted only while the day's rest could pay for the largest run seen so far: past the
        # limit by no more than a run that cost more than every one before it
        assert len(ran) > 1 and sum(ran) <= 1.0 + (max(ran) - min(ran)) + 1e-9
        assert await hub.background.spent() == pytest.approx(sum(ran))


def fires(hub: Hub, name: str) -> float:
    return hub.metrics.registry.get_sample_value("hub_schedule_fires_total", {"schedule": name}) or 0.0


def skips(hub: Hub, name: str) -> float:
    return hub.metrics.registry.get_sample_value("hub_schedule_skips_total", {"schedule": name}) or 0.0


async def test_skip_unchanged_calls_the_model_only_when_something_changed(
    config: HubConfig, make_chat_hub, said: Said
) -> None:
    config.schedules = {
        "digest": ScheduleSection(context=ROOM, every="1h", input="summarise what is new", skip_unchanged=True)
    }
    clock = FakeClock(1_800_000_000.0)
    hub = make_chat_hub()
    model: ScriptedModel = hub.model  # type: ignore[assignment]
    hub.scheduler.clock, hub.scheduler.sleep = clock.time, clock.sleep
    async with hub:
        await clock.advance(3600)
        await said.wait_for(1)
        await hub.scheduler.wait_recorded()  # its fingerprint is kept once its run ended
        assert (fires(hub, "digest"), len(model.requests)) == (1, 1)
        await clock.advance(3600)  # nothing happened in the room since
        assert (fires(hub, "digest"), skips(hub, "digest"), len(model.requests)) == (1, 1, 1)
        await hub.send(ROOM, data="a new message", user="ann")  # the conversation changed
        await clock.advance(3600)
        await said.wait_for(3)
        assert (fires(hub, "digest"), len(model.requests)) == (2, 3)


async def test_child_runs_draw_on_the_background_budget(config: HubConfig, make_chat_hub, said: Said) -> None:
    from tests.features.test_children import brain

    (config.contexts_dir / "default.toml").write_text(
        'name = "Boss"\ninstructions = "Delegate."\nchild_runs = ["test:chat:*"]\n'
    )
    priced(config, 0.05)
    async with make_chat_hub(brain) as hub:
        first = await hub.send("test:chat:boss", data="spawn test:chat:worker summarise the news")
        assert first is not None and first.ok
        (child,) = await hub.runs.list(parent_id=first.run_id)
        assert child.state == RunState.COMPLETED and child.cost > 0.05
        second = await hub.send("test:chat:boss", data="spawn test:chat:worker summarise it again")
        assert second is not None and second.ok, "the parent is a conversation: it goes on"
        (skipped_child,) = await hub.runs.list(parent_id=second.run_id)
        assert (skipped_child.state, skipped_child.reason) == (RunState.KILLED, "background_cost_per_day (0.05)")
        assert skipped(hub, "child") == 1
        assert "startRun ok:" in said.items[-1][1] and "background_cost_per_day" in said.items[-1][1]

"""Schedules: fire on a fake clock, survive restarts, run a missed fire once at start."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from hub import ConfigError, Hub, HubConfig
from hub.config import ScheduleSection, config_from_dict
from hub.features import next_fire
from hub.personas import load_persona
from tests._support.chat import Said
from tests._support.clock import FakeClock

T0 = datetime(2026, 3, 2, 7, 0, tzinfo=UTC).timestamp()  # a Monday, 07:00 UTC


def fires(hub: Hub, name: str) -> float:
    return hub.metrics.registry.get_sample_value("hub_schedule_fires_total", {"schedule": name}) or 0.0


def with_clock(hub: Hub, clock: FakeClock) -> Hub:
    hub.scheduler.clock = clock.time
    hub.scheduler.sleep = clock.sleep
    return hub


async def test_every_fires_on_the_clock(config: HubConfig, make_chat_hub, said: Said) -> None:
    config.schedules = {"tick": ScheduleSection(context="test:chat:room", every="1h", input="write the post")}
    clock = FakeClock(T0)
    async with with_clock(make_chat_hub(), clock) as hub:
        await clock.advance(59 * 60)
        assert fires(hub, "tick") == 0
        await clock.advance(60)
        assert fires(hub, "tick") == 1
        assert await said.wait_for(1) == [("test:chat:room", "echo: write the post")]
        await clock.advance(3600)
        await clock.advance(3600)
        assert fires(hub, "tick") == 3
        runs = await hub.runs.list(context="test:chat:room")
        events = await hub.runs.events(runs[-1].id)
        first = events[0]
        assert first.kind == "input" and first.type == "schedule" and first.meta == {"schedule": "tick"}


async def test_cron_fires_at_its_minute_in_its_zone(config: HubConfig, make_chat_hub, said: Said) -> None:
    config.schedules = {
        "morning": ScheduleSection(context="test:chat:room", cron="0 8 * * *", timezone="UTC", input="good morning")
    }
    clock = FakeClock(T0)
    async with with_clock(make_chat_hub(), clock) as hub:
        await clock.advance(3599)
        assert fires(hub, "morning") == 0
        await clock.advance(1)
        assert fires(hub, "morning") == 1
        await clock.advance(23 * 3600)
        assert fires(hub, "morning") == 1
        await clock.advance(3600)
        assert fires(hub, "morning") == 2
        await said.wait_for(2)


async def test_missed_fires_run_once_at_start_and_the_clock_goes_on_from_there(
    config: HubConfig, make_chat_hub, said: Said
) -> None:
    config.schedules = {"tick": ScheduleSection(context="test:chat:room", every="1h", input="tick")}
    clock = FakeClock(T0)
    async with with_clock(make_chat_hub(), clock) as hub:
        await clock.advance(3600)
        assert fires(hub, "tick") == 1
        await said.wait_for(1)

    # down for five hours and a half: five fires missed, one run at start
    clock = FakeClock(T0 + 6.5 * 3600)
    async with with_clock(make_chat_hub(), clock) as hub:
        await clock.asleep()
        assert fires(hub, "tick") == 1
        await said.wait_for(2)
        await clock.advance(3599)
        assert fires(hub, "tick") == 1
        await clock.advance(1)
        assert fires(hub, "tick") == 2
        await said.wait_for(3)

    # back within the hour: nothing missed, nothing fired at start
    clock = FakeClock(T0 + 7.5 * 3600 + 60)
    async with with_clock(make_chat_hub(), clock) as hub:
        await clock.asleep()
        assert fires(hub, "tick") == 0
        await clock.advance(3600 - 60)
        assert fires(hub, "tick") == 1


async def test_a_new_schedule_counts_from_its_first_start(config: HubConfig, make_chat_hub) -> None:
    config.schedules = {"tick": ScheduleSection(context="test:chat:room", every="2h", input="tick")}
    clock = FakeClock(T0)
    async with with_clock(make_chat_hub(), clock) as hub:
        await clock.asleep()
        assert fires(hub, "tick") == 0
    clock = FakeClock(T0 + 3 * 3600)  # the first fire was due while down
    async with with_clock(make_chat_hub(), clock) as hub:
        await clock.asleep()
        assert fires(hub, "tick") == 1


async def test_jitter_delays_each_fire_within_its_bound(config: HubConfig, make_chat_hub) -> None:
    config.schedules = {"tick": ScheduleSection(context="test:chat:room", every="1h", jitter=600, input="tick")}
    clock = FakeClock(T0)
    hub = with_clock(make_chat_hub(), clock)
    hub.scheduler.rng = random.Random(7)
    expected = random.Random(7).uniform(0, 600)
    async with hub:
        await clock.advance(3600 + expected - 1)
        assert fires(hub, "tick") == 0
        await clock.advance(1)
        assert fires(hub, "tick") == 1


async def test_persona_schedules_fire_under_the_persona_name(config: HubConfig, make_chat_hub, said: Said) -> None:
    (config.contexts_dir / "poster.toml").write_text(
        'name = "Poster"\ninstructions = "Post things."\n'
        '[schedules.post]\ncontext = "test:chat:feed"\nevery = "4h"\ninput = "write today\'s post"\n'
    )
    clock = FakeClock(T0)
    async with with_clock(make_chat_hub(), clock) as hub:
        await clock.advance(4 * 3600)
        assert fires(hub, "poster/post") == 1
        assert await said.wait_for(1) == [("test:chat:feed", "echo: write today's post")]


async def test_an_unknown_context_is_a_config_error_at_start(config: HubConfig, make_chat_hub) -> None:
    config.schedules = {"tick": ScheduleSection(context="nope:chat:1", every="1h", input="tick")}
    with pytest.raises(ConfigError, match=r"schedules\.tick\.context.*unknown context"):
        async with make_chat_hub():
            pass


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"context": "test:chat:1", "input": "x"}, "exactly one of cron"),
        ({"context": "test:chat:1", "input": "x", "every": "4h", "cron": "0 8 * * *"}, "exactly one of cron"),
        ({"context": "test:chat:1", "input": "x", "every": "4 hours"}, "not a duration"),
        ({"context": "test:chat:1", "input": "x", "cron": "0 8 * *"}, "five fields"),
        ({"context": "test:chat:1", "input": "x", "cron": "0 8 * * *", "timezone": "Mars/Olympus"}, "time zone"),
        ({"context": "chat", "input": "x", "every": "1h"}, "TYPE:KEY"),
        ({"context": "test:chat:1", "input": "x", "every": "1h", "jiter": 5}, "unknown key"),
    ],
)
def test_bad_schedule_tables_name_the_key(table: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        config_from_dict({"schedules": {"morning": table}})
    assert "schedules.morning" in str(info.value)


def test_a_bad_persona_schedule_is_a_persona_error(tmp_path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('instructions = "x"\n[schedules.s]\ncontext = "test:chat:1"\ninput = "x"\n')
    with pytest.raises(ConfigError, match=r"p\.toml: schedules\.s.*exactly one"):
        load_persona(path)


def test_next_fire() -> None:
    every = ScheduleSection(context="a:b", every="1h30m", input="x")
    assert next_fire(every, 1000.0) == 1000.0 + 5400
    cron = ScheduleSection(context="a:b", cron="30 */4 * * *", timezone="UTC", input="x")
    assert next_fire(cron, T0) == T0 + 90 * 60  # 08:30
    paris = ScheduleSection(context="a:b", cron="0 8 * * *", timezone="Europe/Paris", input="x")
    assert next_fire(paris, T0) == T0 + 24 * 3600  # 08:00 in Paris is 07:00 UTC: tomorrow's

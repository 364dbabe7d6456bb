"""Reminders: set by the model in a person's words and time zone, capped per person, a cron
refused when it fires more often than every 15 minutes, fired once as an input to the
conversation they were set in (through the persona), listed by /reminders; a fire missed while
the hub was down is sent once at start, marked late, and a fire claimed by a worker that died
before it was recorded is sent once after restart. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from hub import Hub, HubConfig, ScriptedModel
from hub.definitions import CommandCall
from hub.errors import ActionError
from hub.features import Reminders, check_cron, parse_when, reminder_id
from hub.store import InMemoryReminderStore, InMemoryStore, Reminder, open_stores
from hub.testing.postgres import temporary_schema
from tests._support.chat import Said, reply_to_input, test_extension

PARIS = "Europe/Paris"
T0 = datetime(2026, 3, 2, 7, 0, tzinfo=ZoneInfo("UTC")).timestamp()  # a Monday, 08:00 in Paris


def test_words_are_read_in_the_persons_time_zone() -> None:
    at = parse_when("tomorrow at 9:00", timezone=PARIS, now=T0)
    assert datetime.fromtimestamp(at, ZoneInfo(PARIS)) == datetime(2026, 3, 3, 9, 0, tzinfo=ZoneInfo(PARIS))
    assert parse_when("in 2 hours", timezone=PARIS, now=T0) == pytest.approx(T0 + 7200, abs=1)
    at = parse_when("tomorrow at 9:00", timezone="America/New_York", now=T0)
    assert datetime.fromtimestamp(at, ZoneInfo("UTC")).hour == 14  # 9:00 EST


def test_words_that_are_no_time_or_a_past_one_are_refused_clearly() -> None:
    with pytest.raises(ActionError, match="cannot read 'the day after never' as a time"):
        parse_when("the day after never", timezone=PARIS, now=T0)
    with pytest.raises(ActionError, match="has passed"):
        parse_when("2020-01-01 10:00", timezone=PARIS, now=T0)
    with pytest.raises(ActionError, match="unknown time zone 'Mars/Olympus'"):
        parse_when("tomorrow", timezone="Mars/Olympus", now=T0)


@pytest.mark.parametrize("cron", ["*/5 * * * *", "0,10 9 * * *", "* 9 29 2 *", "*/14 * * * *"])
def test_a_cron_more_often_than_every_15_minutes_is_refused(cron: str) -> None:
    with pytest.raises(ActionError, match="at most every 15 minutes"):
        check_cron(cron, timezone=PARIS, now=T0)


@pytest.mark.parametrize("cron", ["*/15 * * * *", "0 9 * * 1", "0,15,30,45 * * * *", "30 23 31 12 *"])
def test_a_cron_at_most_every_15_minutes_is_taken(cron: str) -> None:
    check_cron(cron, timezone=PARIS, now=T0)


@pytest.mark.parametrize("cron", ["every day", "* * * *", "0 9 * * * *", "61 * * * *"])
def test_what_is_no_cron_is_refused(cron: str) -> None:
    with pytest.raises(ActionError, match="not a cron expression of 5 fields"):
        check_cron(cron, timezone=PARIS, now=T0)


async def test_the_cap_per_person_holds_and_says_why() -> None:
    r = Reminders(InMemoryReminderStore(), memory=InMemoryStore(), submit=_no_submit, started=lambda: True, cap=2)
    r.clock = lambda: T0
    for n in range(2):
        await r.set(context="test:chat:a", user="ann", text=f"thing {n}", when="in 1 hour")
    with pytest.raises(ActionError, match="has 2 reminders waiting.*reminders_per_user"):
        await r.set(context="test:chat:a", user="ann", text="one more", when="in 1 hour")
    await r.set(context="test:chat:a", user="bob", text="bob's own", when="in 1 hour")  # per person


async def test_a_named_time_zone_is_kept_for_the_person() -> None:
    r = Reminders(InMemoryReminderStore(), memory=InMemoryStore(), submit=_no_submit, started=lambda: True, cap=0)
    r.clock = lambda: T0
    first = await r.set(context="c:x", user="ann", text="a", when="tomorrow at 9:00", timezone="Asia/Tokyo")
    second = await r.set(context="c:x", user="ann", text="b", when="tomorrow at 9:00")
    assert first.timezone == second.timezone == "Asia/Tokyo"
    assert (await r.set(context="c:x", user="bob", text="c", when="tomorrow at 9:00")).timezone == "UTC"


async def _no_submit(*a: object, **kw: object) -> None:
    raise AssertionError("nothing is sent here")


# --- through a hub ---------------------------------------------------------------------------


def _config(tmp_path: Path, url: str) -> HubConfig:
    cfg = HubConfig()
    cfg.hub.data_dir = str(tmp_path)
    cfg.hub.contexts_dir = str(tmp_path)
    cfg.hub.shutdown_grace = 0.0
    cfg.store.url = url
    cfg.memory.episodes = False
    cfg.agent.reminders = True
    cfg.agent.timezone = PARIS
    return cfg


@contextlib.asynccontextmanager
async def _backend(kind: str) -> AsyncIterator[str]:
    if kind == "postgres":
        async with temporary_schema() as url:
            yield url
    else:
        yield ""


def _hub(cfg: HubConfig, said: Said, responses: Any = reply_to_input, *, now: float = T0) -> Hub:
    hub = Hub(cfg, model=ScriptedModel(responses), load_extensions=False, extensions=[test_extension(said)])
    _reminders(hub).clock = lambda: now
    _reminders(hub).sleep = _never  # the test calls tick(); a new reminder still wakes the loop
    return hub


def _reminders(hub: Hub) -> Reminders:
    assert hub.reminders is not None
    return hub.reminders


async def _never(seconds: float) -> None:
    await asyncio.Event().wait()


async def _reminder_inputs(hub: Hub) -> list[str]:
    rows = await hub._db.fetchall(  # type: ignore[union-attr]
        "SELECT platform_id FROM inbox WHERE platform_id LIKE 'reminder:%' ORDER BY received"
    )
    return [r[0] for r in rows]


def _call(name: str, args: dict[str, object]) -> str:
    return f'<response><action_call name="{name}">{json.dumps(args)}</action_call></response>'


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_set_by_the_model_listed_in_chat_and_fired_once_through_the_persona(
    tmp_path: Path, said: Said, backend: str
) -> None:
    async with _backend(backend) as url:
        cfg = _config(tmp_path, url)
        responses = [
            _call("set_reminder", {"text": "call the dentist", "when": "tomorrow at 9:00"}),
            "<response><output>I will remind you.</output></response>",
            reply_to_input,
        ]
        hub = _hub(cfg, said, responses)
        async with hub:
            result = await hub.send("test:chat:ann", data="remind me tomorrow at nine to call the dentist", user="ann")
            assert result is not None and result.state.value == "completed"
            [r] = await hub.stores.reminders.waiting(user="ann")
            assert r.context == "test:chat:ann" and r.text == "call the dentist"
            assert datetime.fromtimestamp(r.due, ZoneInfo(PARIS)) == datetime(2026, 3, 3, 9, 0, tzinfo=ZoneInfo(PARIS))

            await hub.send("test:chat:ann", data="/reminders", user="ann", command=CommandCall("reminders"))
            assert any("2026-03-03 09:00 CET: call the dentist" in text for _, text in said.items)

            _reminders(hub).clock = lambda: r.due + 5
            await _reminders(hub).tick()
            await _reminders(hub).tick()  # a second pass fires nothing more
            items = await said.wait_for(3)
            assert items[-1] == ("test:chat:ann", "echo: [reminder] call the dentist")
            assert await _reminder_inputs(hub) == [reminder_id(r, r.due)]
            assert await hub.stores.reminders.waiting(user="ann") == []  # a one-off is gone once fired


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_refused_cron_is_what_the_model_sees(tmp_path: Path, said: Said, backend: str) -> None:
    async with _backend(backend) as url:
        seen: list[str] = []

        def answer(request: object) -> str:
            seen.append(request.messages[-1]["content"])  # type: ignore[attr-defined]
            return "<response><output>ok</output></response>"

        responses = [_call("set_reminder", {"text": "drink water", "repeat": "*/5 * * * *"}), answer]
        async with _hub(_config(tmp_path, url), said, responses) as hub:
            await hub.send("test:chat:ann", data="remind me every 5 minutes", user="ann")
            assert "at most every 15 minutes" in seen[0]
            assert await hub.stores.reminders.waiting() == []


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_missed_while_down_fires_once_at_start_marked_late(tmp_path: Path, said: Said, backend: str) -> None:
    async with _backend(backend) as url:
        cfg = _config(tmp_path, url)
        once = Reminder("r1", "test:chat:ann", "ann", "water the plants", due=T0 - 3600, created=T0 - 7200)
        daily = Reminder(
            "r2", "test:chat:ann-work", "ann", "stand up", due=T0 - 86400 * 3, cron="0 8 * * *", timezone=PARIS
        )
        async with open_stores(cfg) as stores:  # set before the hub went down
            assert await stores.reminders.add(once, cap=0) and await stores.reminders.add(daily, cap=0)
        # down for days; started again at T0: each fires once, late, the daily one not once per missed day
        async with _hub(cfg, said) as hub:
            await _reminders(hub).tick()
            items = await said.wait_for(2)
            texts = sorted(t for _, t in items)
            assert len(texts) == 2 and all("sent late" in t for t in texts), texts
            assert "stand up" in texts[0] and "water the plants" in texts[1]
            [left] = await hub.stores.reminders.waiting()
            assert left.id == "r2" and left.due == datetime(2026, 3, 3, 8, 0, tzinfo=ZoneInfo(PARIS)).timestamp()
        async with _hub(cfg, said) as hub:  # and a second restart sends nothing again
            await _reminders(hub).tick()
            assert len(await _reminder_inputs(hub)) == 2
            assert len(said.items) == 2


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("recorded", [False, True])
async def test_a_crash_while_firing_is_handled_once_after_restart(
    tmp_path: Path, said: Said, backend: str, recorded: bool
) -> None:
    async with _backend(backend) as url:
        cfg = _config(tmp_path, url)
        r = Reminder("r1", "test:chat:ann", "ann", "take the pills", due=T0 - 10, timezone=PARIS)
        async with open_stores(cfg) as stores:
            assert await stores.reminders.add(r, cap=0)
            assert await stores.reminders.claim(r.id, r.due, None)  # a worker claimed the fire...
            assert not await stores.reminders.claim(r.id, r.due, None)  # (once)
        async with _hub(cfg, said) as hub:
            if recorded:  # ...and recorded its input, then died before marking it done
                await hub.send(
                    r.context, data="[reminder] take the pills", type="reminder", platform_id=reminder_id(r, r.due)
                )
                await said.wait_for(1)
        async with _hub(cfg, said) as hub:
            await _reminders(hub).tick()
            await said.wait_for(1)
            await _reminders(hub).tick()
            assert await _reminder_inputs(hub) == [reminder_id(r, r.due)]
            assert await hub.stores.reminders.get("r1") is None  # done
        assert [t for _, t in said.items] == ["echo: [reminder] take the pills"]


async def test_the_personas_time_zone_comes_before_the_default_and_a_named_one_before_both(
    tmp_path: Path, said: Said
) -> None:
    (tmp_path / "desk.toml").write_text(
        'name = "Desk"\ninstructions = "Help."\ncontexts = ["test:chat"]\ntimezone = "America/New_York"\n'
    )
    responses = [
        _call("set_reminder", {"text": "stand-up", "when": "tomorrow at 9:00"}),
        "<response><output>ok</output></response>",
        _call("set_reminder", {"text": "call", "when": "tomorrow at 9:00", "timezone": "Asia/Tokyo"}),
        "<response><output>ok</output></response>",
    ]
    async with _hub(_config(tmp_path, ""), said, responses) as hub:
        await hub.send("test:chat:ann", data="remind me", user="ann")
        await hub.send("test:chat:ann", data="remind me, I am in Tokyo", user="ann")
        first, second = sorted(await hub.stores.reminders.waiting(user="ann"), key=lambda r: r.text, reverse=True)
        assert (first.text, first.timezone) == ("stand-up", "America/New_York")
        assert datetime.fromtimestamp(first.due, ZoneInfo("UTC")).hour == 14  # 9:00 in New York
        assert (second.text, second.timezone) == ("call", "Asia/Tokyo")
        assert datetime.fromtimestamp(second.due, ZoneInfo("UTC")).hour == 0  # 9:00 in Tokyo


def test_a_persona_with_an_unknown_time_zone_is_refused(tmp_path: Path) -> None:
    from hub.errors import ConfigError
    from hub.personas import parse_persona

    with pytest.raises(ConfigError, match="unknown time zone 'Mars/Olympus'"):
        parse_persona('name = "X"\ninstructions = "Y"\ntimezone = "Mars/Olympus"\n', tmp_path / "x.toml")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_two_workers_fire_a_reminder_once(tmp_path: Path, said: Said, backend: str) -> None:
    async with _backend(backend) as url, contextlib.AsyncExitStack() as stack:
        configs = [_config(tmp_path, url) for _ in range(2)]
        if url:  # PostgreSQL: the shared store, and a data dir of its own per worker
            for i, cfg in enumerate(configs):
                cfg.hub.data_dir = str(tmp_path / f"w{i}")
        r = Reminder("r1", "test:chat:ann", "ann", "feed the cat", due=T0 - 5, timezone=PARIS)
        # SQLite is one process's store (`hub run` holds the data dir's lock): a second hub
        # starting on it resumes the first's unanswered inputs, as a restart does, so there the
        # reminder is added once both run; PostgreSQL's workers start with it already due
        if url:
            async with open_stores(configs[0]) as stores:
                assert await stores.reminders.add(r, cap=0)
        hubs = [await stack.enter_async_context(_hub(cfg, said)) for cfg in configs]
        if not url:
            assert await hubs[0].stores.reminders.add(r, cap=0)
        await asyncio.gather(*(_reminders(h).tick() for h in hubs), *(_reminders(h).tick() for h in hubs))
        await said.wait_for(1)
        for hub in hubs:
            await _reminders(hub).tick()
        assert await _reminder_inputs(hubs[0]) == [reminder_id(r, r.due)]
        assert [t for _, t in said.items] == ["echo: [reminder] feed the cat"]

"""Run events: every event of a run in order, bounded subscribers, filters, redaction."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from hub import Extension, RunState, ScriptedModel, action
from hub.events import Dropped, RunEnded, RunEvent, RunStarted
from hub.logs import InputLog

CLI = ("cli:session", {"user": "ann"})


class Where(BaseModel):
    location: str


class Nothing(BaseModel):
    pass


@action(name="getWeather", description="Current weather for a location.")
async def get_weather(args: Where, ctx) -> dict:
    return {"temperature": 72}


TOOLS = Extension(name="tools", actions=[get_weather])


def resp(*parts: str) -> str:
    return "<response>" + "".join(parts) + "</response>"


def call(name: str, args: str) -> str:
    return f'<action_call name="{name}">{args}</action_call>'


def two_steps() -> ScriptedModel:
    return ScriptedModel(
        [
            resp("<reasoning>Need the weather.</reasoning>", call("getWeather", '{"location": "NYC"}')),
            resp("<output>It is 72°F in NYC.</output>"),
        ]
    )


async def drain(stream) -> list:
    return [e async for e in stream]


async def test_a_subscriber_sees_every_event_of_a_run_in_order(make_hub) -> None:
    async with make_hub(two_steps(), TOOLS) as hub:
        async with hub.events() as events:
            result = await hub.send(*CLI, "weather in NYC?", user="ann")
            seen = []
            async for e in events:
                seen.append(e)
                if isinstance(e, RunEnded):
                    break
        stored = await hub.runs.events(result.run_id)
    assert isinstance(seen[0], RunStarted) and seen[0].run_id == result.run_id and seen[0].user == "ann"
    assert isinstance(seen[-1], RunEnded) and seen[-1].state == "completed" and seen[-1].steps == 2
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
    middle = seen[1:-1]
    assert all(isinstance(e, RunEvent) for e in middle)
    # exactly what the store recorded, in the same order
    assert [e.kind for e in middle] == [e.kind for e in stored]
    assert [e.kind for e in middle] == [
        "input",
        "thought",
        "action_call",
        "action_result",
        "step",
        "output",
        "step",
        "state",
    ]
    out = next(e.entry for e in middle if e.kind == "output")
    assert out.sent and out.content == "It is 72°F in NYC."


async def test_a_stalled_subscriber_loses_events_counted_and_never_slows_the_run(make_hub) -> None:
    async with make_hub(two_steps(), TOOLS) as hub:
        stalled = hub.events(maxsize=3)  # never read while the run goes on
        full = hub.events()
        result = await hub.send(*CLI, "weather in NYC?", user="ann")  # completes: nothing waits on `stalled`
        assert result.state == RunState.COMPLETED
        everything = []
        async for e in full:
            everything.append(e)
            if isinstance(e, RunEnded):
                break
        assert stalled.dropped == len(everything) - 3
        got = []
        stalled.close()
        got = await drain(stalled)
    assert got[:3] == everything[:3]
    assert got[3] == Dropped(len(everything) - 3)
    assert len(got) == 4


async def test_the_gap_is_reported_where_it_is(make_hub) -> None:
    async with make_hub(
        [resp("<output>one</output>"), resp("<output>two</output>"), resp("<output>3</output>")]
    ) as hub:
        stream = hub.events(maxsize=2, kinds={"run_started", "run_ended"})
        first = await hub.send(*CLI, "1", user="ann")
        second = await hub.send(*CLI, "2", user="ann")  # both of its events are dropped
        a = await stream.__anext__()
        b = await stream.__anext__()
        third = await hub.send(*CLI, "3", user="ann")
        stream.close()
        rest = await drain(stream)
    assert (a.run_id, b.run_id) == (first.run_id, first.run_id)
    assert rest[0] == Dropped(2)
    assert [e.run_id for e in rest[1:]] == [third.run_id, third.run_id]
    assert second.run_id not in {e.run_id for e in rest[1:]}


async def test_filters_by_run_context_and_kind(make_hub) -> None:
    async with make_hub([resp("<output>a</output>"), resp("<output>b</output>")]) as hub:
        outputs = hub.events(kinds=["output"])
        other = hub.events(context="cli:somebody-else")
        first = await hub.send(*CLI, "1", user="ann")
        only_second = hub.events(run="not-yet")  # filtered to a run that never comes
        second = await hub.send(*CLI, "2", user="ann")
        outputs.close()
        other.close()
        only_second.close()
        got = await drain(outputs)
        assert [(e.run_id, e.entry.content) for e in got] == [(first.run_id, "a"), (second.run_id, "b")]
        assert await drain(other) == []
        assert await drain(only_second) == []
        with pytest.raises(ValueError, match="unknown event kind"):
            hub.events(kinds=["outptu"])


async def test_a_stream_of_one_run_ends_with_the_run_and_all_end_when_the_hub_stops(make_hub) -> None:
    gate = asyncio.Event()

    @action(name="wait", description="Waits for the test.")
    async def wait(args: Nothing, ctx) -> str:
        await gate.wait()
        return "ok"

    model = ScriptedModel([resp(call("wait", "{}")), resp("<output>a</output>")])
    hub = make_hub(model, Extension(name="gate", actions=[wait]))
    await hub.start()
    calls = hub.events(kinds=["action_call"], batch=0)
    everything = hub.events()
    task = asyncio.create_task(hub.send(*CLI, "1", user="ann"))
    first = await calls.__anext__()
    one = hub.events(run=first.run_id)  # subscribed while the run goes on: sees it to its end
    gate.set()
    await task
    got = await drain(one)
    assert [e.kind for e in got] == ["action_result", "step", "output", "step", "state", "run_ended"]
    assert got[-1].run_id == first.run_id
    await hub.stop()
    assert (await drain(everything))[-1].kind == "run_ended"  # ended by the stop, not left waiting


async def test_what_is_streamed_is_redacted(make_hub, monkeypatch) -> None:
    secret = "sk-live-0123456789abcdefXYZ"
    monkeypatch.setenv("EVENTS_TEST_API_KEY", secret)
    async with make_hub([resp("<output>ok</output>")]) as hub:
        stream = hub.events(kinds=["input"])
        await hub.send(*CLI, f"my key is {secret}", user="ann")
        stream.close()
        got = await drain(stream)
    assert isinstance(got[0].entry, InputLog)
    assert secret not in str(got[0].entry.content)


async def test_a_handler_that_raises_is_an_output_event_with_its_error(make_hub) -> None:
    from hub import output

    @output(type="boom:out", description="fails")
    async def boom(content: str, ctx) -> None:
        raise RuntimeError("platform down")

    async with make_hub([resp('<output type="boom:out">x</output>')], Extension(name="b", outputs=[boom])) as hub:
        stream = hub.events(kinds=["output", "run_ended"])
        await hub.send(*CLI, "1", user="ann")
        stream.close()
        got = await drain(stream)
    assert got[0].entry.sent is False and "platform down" in got[0].entry.error
    assert got[-1].kind == "run_ended"


async def test_a_store_that_fails_a_run_start_publishes_each_event_once(make_hub) -> None:
    from hub.errors import StoreError
    from hub.store import InMemoryRunStore

    class FailsFirstCreate(InMemoryRunStore):
        failed = False

        async def create(self, run) -> None:
            if not self.failed:
                self.failed = True
                raise StoreError("disk full", store="runs", operation="create")
            await super().create(run)

    async with make_hub([resp("<output>never</output>")], runs=FailsFirstCreate()) as hub:
        stream = hub.events()
        result = await hub.send(*CLI, "1", user="ann")
        stream.close()
        got = await drain(stream)
    assert result.state == RunState.FAILED and "disk full" in result.reason
    kinds = [e.kind for e in got]
    assert kinds[0] == "run_started" and kinds[-1] == "run_ended"  # recorded when the end was
    assert kinds.count("run_started") == 1 and kinds.count("run_ended") == 1
    assert [e.seq for e in got] == list(range(1, len(got) + 1))
    assert got[-1].state == "failed"

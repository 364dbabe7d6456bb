"""The runner: one run at a time per context instance, parallel across instances."""

import asyncio

from hub import InputLog, RunState, ScriptedModel


async def test_one_run_at_a_time_per_context_and_inputs_meanwhile_join_the_next_step(make_hub) -> None:
    gate = asyncio.Event()
    seen_inputs: list[list[str]] = []

    def respond(request):
        content = request.messages[0]["content"]
        seen_inputs.append(
            [line for line in content.splitlines() if line.startswith("<input") and 'new="true"' in line]
        )
        return "ok"

    held = asyncio.Event()  # the first run waits on the gate

    class Slow(ScriptedModel):
        async def stream(self, request):
            if len(self.requests) == 0:
                self.requests.append(request)
                held.set()
                await gate.wait()
                self.requests.pop()
            async for c in super().stream(request):
                yield c

    model = Slow(respond)
    async with make_hub(model) as hub:
        first = await hub.submit("cli:session", {"user": "ann"}, "one")
        await asyncio.wait_for(held.wait(), 5)
        second = await hub.submit("cli:session", {"user": "ann"}, "two")
        third = await hub.submit("cli:session", {"user": "ann"}, "three")
        assert hub.runner.running == 1 and hub.runner.queued == 2
        gate.set()
        r1, r2, r3 = await asyncio.gather(first.wait(), second.wait(), third.wait())
    # the two inputs that arrived meanwhile were taken together by the run's next step
    assert r1.run_id == r2.run_id == r3.run_id and r1.steps == 2
    assert len(seen_inputs[1]) == 2 and "two" in seen_inputs[1][0] and "three" in seen_inputs[1][1]
    assert [e.content for e in r1.logs if isinstance(e, InputLog)] == ["one", "two", "three"]


async def test_contexts_run_in_parallel(make_hub) -> None:
    model = ScriptedModel(default="hi", delay=0.2)
    async with make_hub(model) as hub:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        results = await asyncio.gather(*(hub.send("cli:session", {"user": f"u{i}"}, "hi") for i in range(20)))
        took = loop.time() - t0
    assert all(r.state == RunState.COMPLETED for r in results)
    assert len({r.run_id for r in results}) == 20
    assert took < 1.5  # 20 runs of a 0.2 s model, not 4 s in sequence


async def test_llm_concurrency_is_bounded(make_hub, config) -> None:
    config.model.concurrency = 3
    in_flight = 0
    peak = 0

    class Counting(ScriptedModel):
        async def stream(self, request):
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                async for c in super().stream(request):
                    yield c
            finally:
                in_flight -= 1

    async with make_hub(Counting(default="ok", delay=0.05)) as hub:
        await asyncio.gather(*(hub.send("cli:session", {"user": f"u{i}"}, "x") for i in range(10)))
    assert peak == 3


async def test_stop_cancels_runs_in_flight_and_records_them(make_hub, config) -> None:
    config.hub.shutdown_grace = 0.05
    hub = make_hub(ScriptedModel(default="late", delay=5))
    await hub.start()
    sub = await hub.submit("cli:session", {"user": "ann"}, "x")
    run_id = await asyncio.wait_for(sub.run_id, 2)
    await hub.stop()
    await hub.stop()  # idempotent
    hub2 = make_hub(ScriptedModel(default="answered after restart"))
    async with hub2:
        run = await hub2.runs.get(run_id)
        assert run.state == RunState.KILLED and run.reason == "shutdown"
        # the input was not answered: it is taken again after the restart
        for _ in range(100):
            runs = await hub2.runs.list(state="completed")
            if runs:
                break
            await asyncio.sleep(0.02)
        assert runs and runs[0].id != run_id

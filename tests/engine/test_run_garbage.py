"""A finished run leaves no reference cycle (issue 40, item 34): its objects are freed when the
last reference goes, not left for the garbage collector. A run whose context held the run
(``ctx._stop`` was the bound ``Run.stop``) made about 50 objects of cyclic garbage per turn;
in bench/soak.py they reached the oldest generation, whose collections (up to 76 ms of CPU)
were the event loop's longest pauses."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from hub import RunContext, RunState, ScriptedModel
from hub.engine._active_run import Run
from tests.engine.test_engine import CLI, TOOLS, call, resp


@pytest.fixture
def saved_garbage() -> Iterator[list[object]]:
    """What the collector finds unreachable while the test runs, kept for it to look at
    (``DEBUG_SAVEALL``; automatic collection off, so nothing is missed)."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()


async def test_finished_runs_are_freed_without_the_garbage_collector(make_hub, saved_garbage: list[object]) -> None:
    turns = 6
    model = ScriptedModel(
        [
            resp(call("add", '{"a": 1, "b": 2}')),  # an action call, its result, a second step
            resp("<output>3</output>"),
            *(resp(f"<output>noted {i}</output>") for i in range(turns - 1)),
        ]
    )
    async with make_hub(model, TOOLS) as hub:
        results = [await hub.send(*CLI, f"turn {i}", user="ann") for i in range(turns)]
        assert all(r.state == RunState.COMPLETED for r in results)
        gc.collect()
        cyclic = [o for o in saved_garbage if isinstance(o, (Run, RunContext))]
    assert cyclic == [], f"{len(cyclic)} runs' objects were only freed by the garbage collector"

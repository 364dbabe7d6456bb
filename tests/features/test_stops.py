"""An operator stops one run: in this process, from another process beside it on SQLite (what
``hub stop`` does), and from another worker on PostgreSQL. It ends ``killed``, ``stopped by
operator``, within a second, and the user gets the failure reply."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from hub import HubConfig, RunError, RunState, ScriptedModel
from hub.features import request_stop
from hub.store import open_stores
from hub.testing.postgres import temporary_schema

FAILURE = "Sorry, something went wrong on my side. Please try again in a moment."


class Hanging(ScriptedModel):
    """A model that starts answering and then never finishes; says when a run reached it."""

    def __init__(self) -> None:
        super().__init__(default="<response><output>never</output></response>")
        self.entered = asyncio.Event()

    async def stream(self, request):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        self.entered.set()
        yield "<response><thinking>hmm"
        await asyncio.Event().wait()


async def test_stop_run_kills_a_run_in_progress_within_a_second(make_hub, out) -> None:
    model = Hanging()
    async with make_hub(model) as hub:
        sub = await hub.submit("cli:session", {"user": "ann"}, "think forever", user="ann")
        run_id = await sub.run_id
        await model.entered.wait()
        began = time.monotonic()
        record = await hub.stop_run(run_id[:8])  # an id prefix, as `hub runs` prints it
        took = time.monotonic() - began
        result = await sub.wait()
        with pytest.raises(RunError, match=r"is not running: it ended killed \(stopped by operator\)"):
            await hub.stop_run(run_id)
        with pytest.raises(RunError, match="no run matches 'nope'"):
            await hub.stop_run("nope")
    assert took < 1.0
    assert (record.state, record.reason) == (RunState.KILLED, "stopped by operator")
    assert (result.state, result.reason) == (RunState.KILLED, "stopped by operator")
    assert out.getvalue() == FAILURE + "\n"  # the user is not left waiting in silence


async def test_a_stop_requested_by_another_process_reaches_the_run(make_hub, config: HubConfig) -> None:
    """What ``hub stop RUN_ID`` does beside a ``hub run`` on SQLite: a request row, which the
    hub polls while it has runs in flight."""
    model = Hanging()
    async with make_hub(model) as hub:
        sub = await hub.submit("cli:session", {"user": "ann"}, "think forever", user="ann")
        run_id = await sub.run_id
        await model.entered.wait()
        async with open_stores(config) as other:  # another process's view of the same database
            began = time.monotonic()
            record = await request_stop(other.runs, other.stops, run_id, wait=5.0)
            took = time.monotonic() - began
            assert await other.stops.requested() == {}  # taken by the hub
        result = await sub.wait()
    assert (record.state, record.reason) == (RunState.KILLED, "stopped by operator")
    assert result.reason == "stopped by operator" and took < 1.0


async def test_a_stop_reaches_the_worker_holding_the_run_on_postgres(make_hub, config, tmp_path: Path) -> None:
    model = Hanging()
    async with temporary_schema() as url:
        a, b = config.model_copy(deep=True), config.model_copy(deep=True)
        a.hub.data_dir, b.hub.data_dir = str(tmp_path / "a"), str(tmp_path / "b")
        a.store.url = b.store.url = url
        async with make_hub(model, cfg=a) as worker_a, make_hub(ScriptedModel([]), cfg=b) as worker_b:
            sub = await worker_a.submit("cli:session", {"user": "ann"}, "think forever", user="ann")
            run_id = await sub.run_id
            await model.entered.wait()
            began = time.monotonic()
            record = await worker_b.stop_run(run_id)
            took = time.monotonic() - began
            result = await sub.wait()
    assert (record.state, record.reason) == (RunState.KILLED, "stopped by operator")
    assert result.reason == "stopped by operator" and took < 1.0

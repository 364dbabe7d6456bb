"""Stopping one run in progress, on whichever worker holds it: an operator's stop (``hub stop
RUN_ID``, ``POST /runs/{id}/stop``, the dashboard's Stop button) and a user's ``/stop``.

`RunStops` is a plugin that knows the runs in flight in this process (from
``before_run`` to ``after_run``) and a component that polls the stop requests
(`StopStore`) while there are any. A stop of a run held here ends it at
once; any other becomes a request row, which the worker holding the run (another ``hub run``
on PostgreSQL, or the ``hub run`` beside a ``hub stop`` on SQLite) takes within
``poll`` seconds. Either way the run ends through the engine's own stop: ``killed``, with
the reason given (``stopped by operator``, ``stopped by user``), what was sent stays sent
and nothing more of the answer goes out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection
from typing import Any

from ..definitions import RunContext, RunResult
from ..engine import Plugin
from ..errors import RunError, StoreError
from ..store import RunRecord, RunState, RunStore, StopStore
from ..tasks import cancel_and_wait

__all__ = ["RunStops", "STOPPED_BY_OPERATOR", "request_stop"]

log = logging.getLogger("hub.features")

STOPPED_BY_OPERATOR = "stopped by operator"
"""The reason an operator's stop ends a run ``killed`` with."""


async def find_running(runs: RunStore, run_id: str) -> RunRecord:
    """The run ``run_id`` (an id or a unique prefix), which must be in progress.

    Raises:
        RunError: no run matches, or it has ended (the message says how).
    """
    record = await runs.get(run_id) or await runs.find(run_id)
    if record is None:
        raise RunError(f"no run matches {run_id!r} (give more characters if several do)")
    if record.state != RunState.RUNNING:
        how = f"{record.state}" + (f" ({record.reason})" if record.reason else "")
        raise RunError(f"run {record.id[:10]} is not running: it ended {how}")
    return record


async def wait_ended(runs: RunStore, run_ids: list[str], timeout: float, *, every: float = 0.05) -> list[RunRecord]:
    """The records of ``run_ids`` once each has ended, or as they are after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        records = [r for r in [await runs.get(i) for i in run_ids] if r is not None]
        if all(r.state != RunState.RUNNING for r in records) or time.monotonic() >= deadline:
            return records
        await asyncio.sleep(every)


async def request_stop(
    runs: RunStore, stops: StopStore, run_id: str, reason: str = STOPPED_BY_OPERATOR, *, wait: float = 10.0
) -> RunRecord:
    """Ask whichever worker holds the run to stop it (from a process that runs none: ``hub
    stop``), and wait up to ``wait`` seconds for it to end; its record then.

    Raises:
        RunError: no such run, or it is not running.
    """
    record = await find_running(runs, run_id)
    await stops.request(record.id, reason)
    ended = await wait_ended(runs, [record.id], wait)
    return ended[0] if ended else record


class RunStops(Plugin):
    """The runs in flight here, and stopping one wherever it runs (see the module doc)."""

    name = "stops"

    def __init__(self, runs: RunStore, requests: StopStore, *, poll: float = 0.25, keep: float = 600.0) -> None:
        self.runs = runs
        self.requests = requests
        self.poll = poll
        self.keep = keep  # seconds a request nobody takes is kept (its run ended, or died with its worker)
        self._active: dict[str, RunContext] = {}
        self._task: asyncio.Task[None] | None = None
        self._pruned = 0.0

    # --- the runs in flight here --------------------------------------------------------

    async def before_run(self, ctx: RunContext) -> None:
        self._active[ctx.run.id] = ctx

    async def after_run(self, result: RunResult, ctx: RunContext | None) -> None:
        self._active.pop(result.run_id, None)

    def _stop_here(self, run_id: str, reason: str) -> bool:
        """Stop the run if this process runs it; whether it does."""
        ctx = self._active.get(run_id)
        if ctx is None:
            return False
        log.warning("run %s of %s: %s", run_id[:8], ctx.context.id, reason)
        ctx.stop(RunState.KILLED, reason)
        return True

    # --- stopping -------------------------------------------------------------------------

    async def stop_run(self, run_id: str, reason: str = STOPPED_BY_OPERATOR, *, wait: float = 5.0) -> RunRecord:
        """Stop the run ``run_id`` (an id or a unique prefix) wherever it runs, and wait up to
        ``wait`` seconds for it to end; its record then (still ``running`` if it has not).

        Raises:
            RunError: no such run, or it is not running.
        """
        record = await find_running(self.runs, run_id)
        if not self._stop_here(record.id, reason):
            await self.requests.request(record.id, reason)
        ended = await wait_ended(self.runs, [record.id], wait)
        return ended[0] if ended else record

    async def stop_conversation(
        self,
        conversation: str,
        reason: str,
        *,
        wait: float,
        exclude: Collection[str] = (),
        user: str | None = None,
    ) -> list[str]:
        """Stop the conversation's runs in progress, here and on other workers (all but
        ``exclude``; with ``user``, only the runs answering that user), waiting up to ``wait``
        seconds for them to end; their ids."""
        here = [
            i
            for i, ctx in self._active.items()
            if ctx.context.id == conversation and (user is None or ctx.run.user == user)
        ]
        elsewhere = [
            r.id
            for r in await self.runs.list(limit=100, state=str(RunState.RUNNING), context=conversation)
            if r.id not in here and r.id not in exclude and (user is None or r.user == user)
        ]
        for run_id in here:
            self._stop_here(run_id, reason)
        for run_id in elsewhere:  # another worker's, or one of ours still preparing: the poll takes it
            await self.requests.request(run_id, reason)
        ids = here + elsewhere
        if ids:
            await wait_ended(self.runs, ids, wait)
        return ids

    # --- the requests of other processes ----------------------------------------------------

    async def start(self, hub: Any = None) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._poll_loop(), name="run-stops")

    async def stop(self) -> None:
        """The component's stop: no more polling (the runs themselves end with the hub)."""
        await cancel_and_wait(self._task)
        self._task = None

    async def _poll_loop(self) -> None:
        while True:
            await asyncio.sleep(self.poll)
            try:
                await self.poll_once()
            except StoreError as e:  # the store's health reports it; the next poll tries again
                log.warning("stop requests: %s", e)
            except Exception:
                log.exception("stop requests: polling failed")

    async def poll_once(self) -> list[str]:
        """Stop the runs held here that a request names (clearing those requests), and prune
        requests nobody took; the ids stopped."""
        stopped: list[str] = []
        if self._active:  # idle workers do not read the table
            wanted = await self.requests.requested()
            stopped = [i for i, reason in wanted.items() if self._stop_here(i, reason)]
            if stopped:
                await self.requests.clear(stopped)
        now = time.time()
        if now - self._pruned > 60:
            self._pruned = now
            await self.requests.prune(now - self.keep)
        return stopped

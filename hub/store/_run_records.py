"""Runs: the `RunStore` seam, one row per run with an append-only event log.

States (DESIGN.md): ``running`` from the first step; then one terminal state of
``completed``, ``failed``, ``rejected`` or ``killed``. Runs found ``running`` at boot were cut
off by a crash and become ``killed`` with reason ``abnormal_exit``.

The backends: `hub.store.InMemoryRunStore` (hub/store/_in_memory.py) and the SQL one
(hub/store/sql/_runs.py), on SQLite or, shared by several workers, on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable
from dataclasses import dataclass, field
from enum import StrEnum

from ..logs import InputLog, Log, new_id

__all__ = [
    "FORGOTTEN",
    "RunState",
    "RunRecord",
    "RunStore",
    "RunTotals",
    "TERMINAL_STATES",
    "collect_tree",
    "descendants",
    "forgotten_input",
    "preview",
    "search_needle",
]


class RunState(StrEnum):
    """Where a run stands: ``running``, then one terminal state. A string enum, so a state
    compares equal to its value (``RunState.COMPLETED == "completed"``), as stored and as
    [`RunEnded.state`][hub.RunEnded] and [`StateLog.state`][hub.StateLog] carry it.
    """

    RUNNING = "running"
    """Taken by a worker and not ended yet."""
    COMPLETED = "completed"
    """Ended normally: the model finished (its outputs may still have failed to send)."""
    FAILED = "failed"
    """Ended by an error: the model failed past its retries, an action aborted it, the store failed."""
    REJECTED = "rejected"
    """Ended because a critical action was denied (the role guard)."""
    KILLED = "killed"
    """Stopped: by someone (`/stop`, [`Hub.stop_run`][hub.Hub.stop_run]), by a limit (`max_steps`,
    `max_tokens`), or cut off by a restart."""


TERMINAL_STATES = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.REJECTED, RunState.KILLED})


@dataclass(slots=True)
class RunRecord:
    """The record of one run as the run store keeps it: its state and totals, without its log
    (``hub runs`` lists these; [`Hub.stop_run`][hub.Hub.stop_run] returns one). Its log entries
    are in [`RunResult.logs`][hub.RunResult] and ``hub trace``.
    """

    context: str
    """The conversation the run is in (`TYPE:KEY`)."""
    id: str = field(default_factory=new_id)
    """The run's id (`hub trace ID` takes it, or a unique prefix)."""
    state: RunState = RunState.RUNNING
    """Where the run stands now."""
    reason: str | None = None
    """Why a run that did not complete ended so; None otherwise."""
    steps: int = 0
    """How many steps (model calls) it took."""
    prompt_tokens: int = 0
    """Prompt tokens of all its steps."""
    completion_tokens: int = 0
    """Tokens the model wrote in all its steps."""
    started: float = field(default_factory=time.time)
    """When it started (seconds since the epoch)."""
    ended: float | None = None
    """When it ended; None while it runs."""
    parent_id: str | None = None
    """The run that started it as a child run, if any."""
    user: str | None = None
    """Who sent the input it answers, if known."""
    seq: int = 0
    """How many log entries it has (they are numbered from 1)."""
    store_failed: bool = False
    """The store failed the run (an outage, not its input's fault): its inputs are retried, never parked for it."""
    cost: float = 0.0
    """What its model calls cost, at ``[model] price_input``/``price_output`` (0: none, or unknown prices)."""
    user_name: str | None = None
    """The sender's display name, as the platform gave it with the input (``meta["user_name"]``)."""
    user_handle: str | None = None
    """The sender's @username, without the ``@`` (``meta["user_handle"]``)."""
    message: str = ""
    """A one-line preview of the input the run was started for (see `preview()`)."""
    reply: str = ""
    """A one-line preview of the run's last reply sent, once it sent one."""
    models: str = ""
    """The named models that answered its steps, comma-separated in the order they first
    did (``"model"``: ``[model]``; ``"model,backup"``: the fallback answered too); "": the only model."""
    cached_tokens: int = 0
    """Of ``prompt_tokens``, those the provider served from its prompt cache."""

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens together."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def duration(self) -> float | None:
        """Seconds from its start to its end; None while it runs."""
        return None if self.ended is None else self.ended - self.started


@dataclass(frozen=True, slots=True)
class RunTotals:
    """What the runs started in a span of time add up to (the dashboard's health page)."""

    runs: int = 0
    failed: int = 0
    tokens: int = 0
    cost: float = 0.0

    @property
    def error_rate(self) -> float | None:
        """The share of the runs that failed; None when there were none."""
        return self.failed / self.runs if self.runs else None


class RunStore(ABC):
    """Where runs and their event logs live."""

    @abstractmethod
    async def create(self, run: RunRecord) -> None:
        """Record a new run; durable when it returns."""

    def create_soon(self, run: RunRecord) -> Awaitable[None]:
        """Record a new run now and wait later: the result ends once the run is durable
        (raising what `create()` would). A store that writes behind commits it with the
        entries appended after it, at the next `sync()`: the engine's first step waits
        for both at once, before the model is asked anything."""
        return asyncio.ensure_future(self.create(run))

    @abstractmethod
    def append(self, run: RunRecord, entry: Log) -> None:
        """Append one entry to the run's log (committed within milliseconds, in order)."""

    @abstractmethod
    def update(self, run: RunRecord) -> None:
        """Record progress counters (steps, tokens) without waiting."""

    @abstractmethod
    async def finish(self, run: RunRecord) -> None:
        """Record the terminal state; durable when it returns, with every entry before it."""

    async def sync(self) -> None:  # noqa: B027 - stores that write behind override it
        """Wait until every entry appended so far is durable."""

    @abstractmethod
    async def get(self, run_id: str) -> RunRecord | None: ...

    @abstractmethod
    async def list(
        self, *, limit: int = 20, state: str | None = None, context: str | None = None, parent_id: str | None = None
    ) -> list[RunRecord]:
        """Most recent first."""

    async def page(
        self,
        *,
        limit: int = 50,
        before: tuple[float, str] | None = None,
        state: str | None = None,
        context: str | None = None,
        platform: str | None = None,
    ) -> builtins.list[RunRecord]:
        """One page of runs, most recent first, ordered by (started, id): keyset paging, so a
        page costs the same however deep it is. ``before`` is the (started, id) of the last
        run of the previous page; ``platform`` keeps contexts whose type begins ``PLATFORM:``.

        This default reads through `list()`; stores with an index override it.
        """
        runs = await self.list(limit=1_000_000, state=state, context=context)
        runs = [r for r in runs if _in_page(r, before, platform)]
        runs.sort(key=lambda r: (r.started, r.id), reverse=True)
        return runs[:limit]

    async def search(
        self,
        text: str,
        *,
        limit: int = 50,
        before: tuple[float, str] | None = None,
        state: str | None = None,
        context: str | None = None,
        platform: str | None = None,
    ) -> builtins.list[RunRecord]:
        """One page of the runs whose context, user, name, handle, message or reply contains
        ``text`` (case-insensitive; a leading ``@`` is dropped), most recent first, as `page()`.
        The SQL stores read their full-text index instead: runs holding a word that starts
        with each word of ``text`` (punctuation, ``%`` and ``_`` are not words)."""
        runs = await self.page(limit=1_000_000, before=before, state=state, context=context, platform=platform)
        needle = search_needle(text)
        return [r for r in runs if any(needle in (v or "").lower() for v in _searched(r))][:limit]

    async def conversations(
        self, *, limit: int = 50, platform: str | None = None, text: str | None = None
    ) -> builtins.list[tuple[RunRecord, int]]:
        """Conversations by their latest run, newest first: ``(that run, runs in the conversation)``.
        With ``text``, the conversations that have runs matching it (as `search()`), each
        with its latest matching run and the number of them."""
        runs = await (
            self.search(text, limit=1_000_000, platform=platform)
            if text
            else self.page(limit=1_000_000, platform=platform)
        )
        latest: dict[str, RunRecord] = {}
        count: dict[str, int] = {}
        for r in runs:  # most recent first
            latest.setdefault(r.context, r)
            count[r.context] = count.get(r.context, 0) + 1
        return [(r, count[c]) for c, r in latest.items()][:limit]

    async def totals(self, *, since: float) -> RunTotals:
        """The runs started at ``since`` or later: how many, how many failed, their tokens and cost."""
        runs = [r for r in await self.list(limit=1_000_000) if r.started >= since]
        return RunTotals(
            len(runs),
            sum(1 for r in runs if r.state == RunState.FAILED),
            sum(r.tokens for r in runs),
            sum(r.cost for r in runs),
        )

    async def histogram(self, *, since: float, width: float, buckets: int) -> builtins.list[RunTotals]:
        """The runs started from ``since`` on, in ``buckets`` spans of ``width`` seconds each,
        oldest first (a chart's bars: runs, failures, tokens, cost per span)."""
        out = [[0, 0, 0, 0.0] for _ in range(buckets)]
        for r in await self.list(limit=1_000_000):
            i = int((r.started - since) // width)
            if 0 <= i < buckets:
                b = out[i]
                b[0] += 1
                b[1] += r.state == RunState.FAILED
                b[2] += r.tokens
                b[3] += r.cost
        return [RunTotals(int(a), int(f), int(t), float(c)) for a, f, t, c in out]

    async def recent_contexts(
        self, *, limit: int = 50, platform: str | None = None
    ) -> builtins.list[tuple[str, float, int]]:
        """Conversations by their latest run: ``(context, started of its latest run, runs)``."""
        seen: dict[str, tuple[float, int]] = {}
        for r in await self.list(limit=1_000_000):
            if platform is not None and not r.context.startswith(platform + ":"):
                continue
            last, n = seen.get(r.context, (r.started, 0))
            seen[r.context] = (max(last, r.started), n + 1)
        rows = sorted(((c, t, n) for c, (t, n) in seen.items()), key=lambda x: x[1], reverse=True)
        return rows[:limit]

    @abstractmethod
    async def events(self, run_id: str) -> builtins.list[Log]: ...

    async def events_after(self, run_id: str, seq: int) -> builtins.list[tuple[int, Log]]:
        """The run's entries after the ``seq``-th, each with its number (from 1): a follower's cursor."""
        return [(n, e) for n, e in enumerate(await self.events(run_id), 1) if n > seq]

    async def active(self, *, since: float, context: str | None = None) -> builtins.list[RunRecord]:
        """Runs still running, or started at ``since`` or later, oldest first (``--follow``)."""
        runs = await self.list(limit=1_000_000, context=context)
        return sorted((r for r in runs if r.state == RunState.RUNNING or r.started >= since), key=lambda r: r.started)

    @abstractmethod
    async def forget_user(self, user: str, *, platform: str) -> tuple[int, int]:
        """Erase ``user`` of ``platform`` from the run records (``hub memory forget --person``):
        the runs they started in the platform's conversations and every run under those (child
        runs), with their event logs; and in other people's runs there, each input of theirs
        is replaced by a blank one (`forgotten_input`). Returns (runs deleted, inputs
        blanked). Running it again finds nothing more: a forget cut off is finished by repeating it."""

    @abstractmethod
    async def recover(self) -> builtins.list[RunRecord]:
        """Runs left ``running`` by a crash become ``killed``/``abnormal_exit``; returns them."""

    async def find(self, prefix: str) -> RunRecord | None:
        """A run by id or unique id prefix (as printed by ``hub runs``)."""
        run = await self.get(prefix)
        if run is not None:
            return run
        matches = [r for r in await self.list(limit=10_000) if r.id.startswith(prefix)]
        return matches[0] if len(matches) == 1 else None

    async def open(self) -> None:  # noqa: B027
        pass

    async def close(self) -> None:  # noqa: B027
        pass


FORGOTTEN = "[forgotten]"
"""What a forgotten person's input in someone else's run reads as from then on."""


def forgotten_input(entry: InputLog) -> InputLog:
    """``entry`` with nothing of its sender left: no text, user, platform id, names, media or
    drafts; its id, type, time and whether it was handled stay, so the trace still reads in order."""
    return InputLog(type=entry.type, content=FORGOTTEN, id=entry.id, ts=entry.ts, processed=entry.processed)


def descendants(children: dict[str | None, builtins.list[str]], roots: builtins.list[str]) -> builtins.list[str]:
    """``roots`` and every run under them, given each run's child runs."""
    out, seen, frontier = [], set(), list(roots)
    while frontier:
        run_id = frontier.pop()
        if run_id in seen:
            continue
        seen.add(run_id)
        out.append(run_id)
        frontier.extend(children.get(run_id, ()))
    return out


def search_needle(text: str) -> str:
    """What a search looks for: ``text`` lowercased, without a leading ``@`` (a handle as typed)."""
    return text.strip().removeprefix("@").lower()


def _searched(r: RunRecord) -> tuple[str | None, ...]:
    return (r.context, r.user, r.user_name, r.user_handle, r.message, r.reply)


def preview(value: object, limit: int = 200) -> str:
    """``value`` (a message's text, or its JSON) as one line of at most ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _in_page(r: RunRecord, before: tuple[float, str] | None, platform: str | None) -> bool:
    if platform is not None and not r.context.startswith(platform + ":"):
        return False
    return before is None or (r.started, r.id) < before


async def collect_tree(store: RunStore, root_id: str, *, max_runs: int = 1000) -> dict[str, list[RunRecord]]:
    """Every descendant of ``root_id``: run id -> its child runs, oldest first (at most
    ``max_runs`` runs). ``hub trace`` draws it (hub/cli/_trace.py), the dashboard lists it (hub/http/dashboard/_pages.py)."""
    tree: dict[str, list[RunRecord]] = {}
    frontier, seen = [root_id], {root_id}
    count = 0
    while frontier and count < max_runs:
        parent = frontier.pop(0)
        kids = await store.list(parent_id=parent, limit=max_runs - count)
        kids = sorted((k for k in kids if k.id not in seen), key=lambda r: r.started)
        if kids:
            tree[parent] = kids
        for k in kids:
            seen.add(k.id)
            frontier.append(k.id)
        count += len(kids)
    return tree

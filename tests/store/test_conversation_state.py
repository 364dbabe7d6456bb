"""Conversations' memory under generated interleavings, on every backend (in memory, SQLite,
PostgreSQL): runs that begin, say things and save in any order (several at once on one
conversation), ``/new``, retention at generated times, and restarts (the store reopened).

After every step: nothing a user said is lost unless it was forgotten on purpose (``/new``,
or retention of a conversation idle past the window), and nothing forgotten comes back, in
the memory or the history. A counter's increments from concurrent runs all count.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from hub.config import RetentionSection
from hub.store import Forgotten, Generation, InMemoryStore, MemoryStore, prune
from hub.store.sql import Database, PgDatabase, SqlMemoryStore
from hub.testing.postgres import temporary_schema

DAY = 86_400.0
DAYS = 2  # the retention window of these tests
CONVERSATIONS = ["chat:a", "chat:b"]
COUNTERS = ["visits"]
_words = itertools.count()


@dataclass
class RunState:
    """A run in flight: what it loaded and what it said since."""

    conversation: str
    generation: Generation
    life: int  # the model's count of the conversation's lives when the run began
    memory: Any
    version: Any
    history: list[str]
    said: list[str] = field(default_factory=list)


class ConversationMachine(RuleBasedStateMachine):
    backend = "memory"
    url = ""  # PostgreSQL: the test's schema
    runs = Bundle("runs")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.now = 1_000_000.0
        self.tmp = Path(tempfile.mkdtemp(prefix="hub-state-"))
        self.db: Any = None
        self.store: MemoryStore = self._await(self._open())
        if self.backend == "postgres":  # one schema for the test: each example starts it empty
            self._await(self.db.write("DELETE FROM kv"))
            self._await(self.db.write("DELETE FROM conversations"))
        # the model: per conversation, its life, when it was last active, and what it keeps
        self.life = dict.fromkeys(CONVERSATIONS, 0)
        self.active: dict[str, float | None] = dict.fromkeys(CONVERSATIONS)
        self.kept: dict[str, list[str]] = {c: [] for c in CONVERSATIONS}  # said and saved in this life
        self.visits = dict.fromkeys(CONVERSATIONS, 0)
        self.forgotten: set[str] = set()
        self.seq = 0
        self.last: dict[str, int | None] = dict.fromkeys(CONVERSATIONS)

    def _await(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def _open(self) -> MemoryStore:
        if self.backend == "memory":
            store: MemoryStore = InMemoryStore()
        else:
            self.db = Database(self.tmp / "hub.db") if self.backend == "sqlite" else PgDatabase(self.url)
            store = SqlMemoryStore(self.db)
            await store.open()
        store.clock = lambda: self.now
        return store

    def teardown(self) -> None:
        if self.db is not None:
            self._await(self.db.close())
        self.loop.close()

    # --- what runs, users and the operator do ----------------------------------------------

    @rule(target=runs, conversation=st.sampled_from(CONVERSATIONS))
    def begin(self, conversation: str) -> RunState:
        async def go() -> RunState:
            generation = await self.store.begin(conversation)
            memory, version = await self.store.get_versioned(f"memory:{conversation}")
            history = await self.store.get(f"working-memory:{conversation}") or []
            return RunState(conversation, generation, self.life[conversation], memory, version, list(history))

        run = self._await(go())
        self.active[conversation] = max(self.active[conversation] or 0.0, self.now)
        return run

    @rule(run=runs)
    def say(self, run: RunState) -> None:
        run.said.append(f"w{next(_words)}")

    @rule(run=consumes(runs))
    def save(self, run: RunState) -> None:
        """The run's end: its words into the merged memory, a visit counted, its history."""
        c = run.conversation
        base = run.memory or {}
        self.seq += 1  # a leaf both runs set: the later save's value, never a sum
        ours = {
            **base,
            "said": [*base.get("said", []), *run.said],
            "visits": base.get("visits", 0) + 1,
            "last": self.seq,
        }

        async def go() -> bool:
            try:
                await self.store.save_merged(
                    f"memory:{c}",
                    ours,
                    base=run.memory,
                    version=run.version,
                    counters=COUNTERS,
                    generation=run.generation,
                )
            except Forgotten:
                return False
            return await self.store.set_if_current(f"working-memory:{c}", run.history + run.said, run.generation)

        saved = self._await(go())
        if run.life == self.life[c]:  # its life goes on: nothing it said may be dropped
            assert saved, f"a save of {c} in its current life was refused"
            self.kept[c].extend(run.said)
            self.visits[c] += 1
            self.last[c] = self.seq
        else:  # /new or retention ended its life while it ran: what it said is forgotten
            assert not saved, f"a run from before {c} was forgotten saved it back"
            self.forgotten.update(run.said)

    @rule(conversation=st.sampled_from(CONVERSATIONS))
    def new(self, conversation: str) -> None:
        self._await(self.store.forget(conversation))
        self._end_life(conversation)
        self.active[conversation] = self.now

    @rule(days=st.floats(0.05, 1.5))
    def wait(self, days: float) -> None:
        self.now += days * DAY

    @rule()
    def retention(self) -> None:
        before = self.now - DAYS * DAY
        if self.db is None:
            self._await(self.store.prune_idle(before))
        else:
            self._await(prune(self.db, RetentionSection(days=DAYS, max_runs=0, batch=1), now=self.now))
        for c in CONVERSATIONS:
            last = self.active[c]
            if last is not None and last < before:
                self._end_life(c)
                self.active[c] = None

    @rule()
    def restart(self) -> None:
        if self.db is None:
            return  # memory does not outlive its process: nothing to reopen

        async def go() -> None:
            await self.db.close()
            self.store = await self._open()

        self._await(go())

    def _end_life(self, conversation: str) -> None:
        self.life[conversation] += 1
        self.forgotten.update(self.kept[conversation])
        self.kept[conversation] = []
        self.visits[conversation] = 0
        self.last[conversation] = None

    # --- after every step ---------------------------------------------------------------------

    @invariant()
    def nothing_lost_and_nothing_forgotten_comes_back(self) -> None:
        async def read() -> dict[str, tuple[Any, Any]]:
            return {
                c: (await self.store.get(f"memory:{c}"), await self.store.get(f"working-memory:{c}"))
                for c in CONVERSATIONS
            }

        for c, (memory, history) in self._await(read()).items():
            said = (memory or {}).get("said", [])
            assert sorted(said) == sorted(self.kept[c]), (c, said, self.kept[c])  # each once, none lost
            assert (memory or {}).get("visits", 0) == self.visits[c], (c, memory)
            assert (memory or {}).get("last") == self.last[c], (c, memory)
            back = (set(said) | set(history or [])) & self.forgotten
            assert not back, f"{c}: forgotten words came back: {back}"


def _settings(examples: int, phases: tuple[Phase, ...] = tuple(Phase)) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        phases=phases,
    )


# a PostgreSQL example costs a schema and its migrations: fewer of them, as many steps
EXAMPLES = {"memory": 60, "sqlite": 30, "postgres": 15}


class InMemory(ConversationMachine):
    backend = "memory"


class OnSqlite(ConversationMachine):
    backend = "sqlite"


class OnPostgres(ConversationMachine):
    backend = "postgres"


@pytest.mark.parametrize("machine", [InMemory, OnSqlite, OnPostgres], ids=["memory", "sqlite", "postgres"])
def test_conversation_memory_under_interleaved_runs_new_retention_and_restarts(machine: type) -> None:
    # on SQL a failure is reported as found, unshrunk: shrinking there outlasts the timeout
    phases = tuple(p for p in Phase if p is not Phase.shrink) if machine.backend != "memory" else tuple(Phase)
    machine.TestCase.settings = _settings(EXAMPLES[machine.backend], phases)
    if machine.backend != "postgres":
        machine.TestCase().runTest()
        return
    loop = asyncio.new_event_loop()  # the schema's own connection lives on this loop
    schema = temporary_schema()
    try:
        machine.url = loop.run_until_complete(schema.__aenter__())
        try:
            machine.TestCase().runTest()
        finally:
            loop.run_until_complete(schema.__aexit__(None, None, None))
    finally:
        loop.close()

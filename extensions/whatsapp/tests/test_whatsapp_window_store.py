"""The 24-hour window kept in the hub's memory store, which every worker shares: under any
interleaving of users' messages and Meta's 131047 refusals, on every backend (in memory,
SQLite, PostgreSQL), the newest message's time never moves back and a refusal is over only
for a message of its second or later: the store holds one of the states some serial order
of the racing writes gives."""

from __future__ import annotations

import asyncio
import tempfile
from contextlib import AsyncExitStack
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from hub.testing import memory_store_on
from hub_whatsapp import Windows

User = tuple[float | None, float | None]  # the newest message's time, the open refusal's
Op = tuple[str, int]
times = st.integers(min_value=1, max_value=20)
ops = st.tuples(st.sampled_from(["opened", "closed"]), times)


def apply(state: User, op: Op) -> User:
    """What one write does, alone (the specification)."""
    last, closed = state
    kind, at = op
    if kind == "opened":
        last = at if last is None else max(last, at)
        return last, (None if closed is not None and closed <= at else closed)
    return last, at if closed is None else max(closed, at)


def machine(backend: str) -> type[RuleBasedStateMachine]:
    class WindowWrites(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.stack = AsyncExitStack()
            self.tmp = tempfile.TemporaryDirectory()
            self.windows = self.run(self._open())
            self.possible: set[User] = {(None, None)}

        def run(self, coro: Any) -> Any:
            return self.loop.run_until_complete(coro)

        async def _open(self) -> Windows:
            memory = await self.stack.enter_async_context(memory_store_on(backend, self.tmp.name))
            return Windows(memory, clock=lambda: 10.0)

        async def _do(self, op: Op) -> None:
            kind, at = op
            await (self.windows.opened("u", at) if kind == "opened" else self.windows.closed("u", at))

        @rule(op=ops)
        def one(self, op: Op) -> None:
            self.run(self._do(op))
            self.possible = {apply(s, op) for s in self.possible}

        @rule(a=ops, b=ops)
        def race(self, a: Op, b: Op) -> None:
            async def both() -> None:
                await asyncio.gather(self._do(a), self._do(b))

            self.run(both())
            self.possible = {apply(apply(s, a), b) for s in self.possible} | {
                apply(apply(s, b), a) for s in self.possible
            }

        @invariant()
        def a_serial_order_explains_the_store(self) -> None:
            memory = self.windows.memory
            last = self.run(memory.get("whatsapp:window:u"))
            closed = self.run(memory.get("whatsapp:closed:u")) or None  # 0: no refusal
            actual = (last, closed)
            assert actual in self.possible, (actual, self.possible)
            self.possible = {actual}
            is_open = self.run(self.windows.is_open("u"))
            assert is_open == (last is not None and (closed is None or closed < last))

        def teardown(self) -> None:
            self.run(self.stack.aclose())
            self.loop.close()
            self.tmp.cleanup()

    return WindowWrites


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_window_writes_under_generated_interleavings(backend: str) -> None:
    cls = machine(backend)
    cls.TestCase.settings = settings(
        max_examples={"memory": 25, "sqlite": 15, "postgres": 5}[backend],
        stateful_step_count=10,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    cls.TestCase().runTest()

"""The UID cursor kept in the hub's memory store, which every worker shares and restarts
find again: under any interleaving of moves (a worker that lost the lease finishing a mail,
a new UIDVALIDITY, a restart's first move), on every backend (in memory, SQLite,
PostgreSQL), it never moves back: it is the greatest (UIDVALIDITY, UID) any move asked for."""

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
from hub_email import Cursor, Cursors

KEY = "email:cursor:bot@example.org:INBOX"
moves = st.builds(Cursor, st.integers(min_value=1, max_value=3), st.integers(min_value=0, max_value=30))


def machine(backend: str) -> type[RuleBasedStateMachine]:
    class CursorMoves(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.stack = AsyncExitStack()
            self.tmp = tempfile.TemporaryDirectory()
            self.cursors = self.run(self._open())
            self.greatest: Cursor | None = None

        def run(self, coro: Any) -> Any:
            return self.loop.run_until_complete(coro)

        async def _open(self) -> Cursors:
            memory = await self.stack.enter_async_context(memory_store_on(backend, self.tmp.name))
            return Cursors(memory)

        def _asked(self, *moves: Cursor) -> None:
            self.greatest = max([m for m in (self.greatest, *moves) if m is not None])

        @rule(to=moves)
        def one(self, to: Cursor) -> None:
            stored = self.run(self.cursors.advance(KEY, to))
            self._asked(to)
            assert stored == self.greatest

        @rule(a=moves, b=moves, c=moves)
        def race(self, a: Cursor, b: Cursor, c: Cursor) -> None:
            async def all_at_once() -> list[Cursor]:
                return list(await asyncio.gather(*(self.cursors.advance(KEY, m) for m in (a, b, c))))

            stored = self.run(all_at_once())
            self._asked(a, b, c)
            assert all(s >= m for s, m in zip(stored, (a, b, c), strict=True))  # each saw its own move, or a later

        @invariant()
        def never_back(self) -> None:
            assert self.run(self.cursors.get(KEY)) == self.greatest

        def teardown(self) -> None:
            self.run(self.stack.aclose())
            self.loop.close()
            self.tmp.cleanup()

    return CursorMoves


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_the_cursor_never_moves_back_under_generated_interleavings(backend: str) -> None:
    cls = machine(backend)
    cls.TestCase.settings = settings(
        max_examples={"memory": 25, "sqlite": 15, "postgres": 5}[backend],
        stateful_step_count=10,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    cls.TestCase().runTest()

"""The approval store's contract on every backend: a question asked twice (a run resumed
after a crash) is one row; each answer is a compare-and-set, so racing answers, a second
press, an answer after the timeout and the run's own claim give exactly one outcome."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from hub import HubConfig
from hub.store import (
    Approval,
    ApprovalState,
    ApprovalStore,
    InMemoryInbox,
    InMemoryRunStore,
    InMemoryStore,
    approval_key,
    open_stores,
)
from hub.testing.postgres import temporary_schema
from tests._support.backends import BACKENDS

P, A, D, E, X = (
    ApprovalState.PENDING,
    ApprovalState.APPROVED,
    ApprovalState.DENIED,
    ApprovalState.EXPIRED,
    ApprovalState.DONE,
)


@asynccontextmanager
async def approvals_on(backend: str, tmp: Path) -> AsyncIterator[ApprovalStore]:
    config = HubConfig()
    config.hub.data_dir = str(tmp / "data")
    async with AsyncExitStack() as own:
        if backend == "memory":
            stores = await own.enter_async_context(
                open_stores(config, memory=InMemoryStore(), runs=InMemoryRunStore(), inbox=InMemoryInbox())
            )
        else:
            if backend == "postgres":
                config.store.url = await own.enter_async_context(temporary_schema())
            stores = await own.enter_async_context(open_stores(config, worker="w1"))
        yield stores.approvals


def question(n: int = 1, *, run: str = "r1", expires: float = 100.0) -> Approval:
    args = {"path": f"/tmp/{n}", "quote": "it's 100% _x_"}
    return Approval(
        id=f"a{n}",
        key=approval_key("cli:chat:u", ["in1"], "delete", args),
        run_id=run,
        context="cli:chat:u",
        action="delete",
        args=args,
        state=P,
        created=float(n),
        expires=expires,
        platform="cli",
        user="u",
    )


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_a_question_asked_again_is_the_same_row_moved_to_the_new_run(backend: str, tmp_path: Path) -> None:
    async with approvals_on(backend, tmp_path) as store:
        first = await store.ask(question())
        again = await store.ask(question(run="r2"))
        assert again.id == first.id == "a1"
        assert again.run_id == "r2" and again.args == first.args
        assert [a.id for a in await store.list(states=(P,))] == ["a1"]


async def test_one_answer_wins_and_a_late_one_changes_nothing(backend: str, tmp_path: Path) -> None:
    async with approvals_on(backend, tmp_path) as store:
        await store.ask(question(1))
        await store.ask(question(2))
        results = await asyncio.gather(
            store.move("a1", P, A, now=10.0, by="u", before_expiry=True),
            store.move("a1", P, D, now=10.0, by="operator", before_expiry=True),
        )
        assert sorted(results) == [False, True]
        a1 = await store.get("a1")
        assert a1 is not None and a1.state in (A, D) and a1.answered == 10.0
        assert a1.answered_by == ("u" if a1.state == A else "operator")
        assert not await store.move("a2", P, A, now=100.0, by="u", before_expiry=True)  # at its expiry: too late
        assert await store.move("a2", P, E, now=100.0)
        assert (await store.get("a2")).state == E  # type: ignore[union-attr]
        assert await store.prune(before=1.5) == 1 and await store.get("a1") is None


def machine(backend: str) -> type[RuleBasedStateMachine]:
    class Answers(RuleBasedStateMachine):
        """Presses, operators, the timeout and the run's claim in any order, two at once."""

        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.stack = AsyncExitStack()
            self.tmp = tempfile.TemporaryDirectory()
            self.store: ApprovalStore = self.loop.run_until_complete(
                self.stack.enter_async_context(approvals_on(backend, Path(self.tmp.name)))
            )
            self.loop.run_until_complete(self.store.ask(question(expires=50.0)))
            self.wins: list[tuple[ApprovalState, ApprovalState]] = []

        def _move(self, frm: ApprovalState, to: ApprovalState, now: float) -> Any:
            return self.store.move("a1", frm, to, now=now, by="x", before_expiry=to in (A, D))

        @rule(
            a=st.sampled_from([(P, A), (P, D), (P, E), (A, X)]),
            b=st.sampled_from([(P, A), (P, D), (P, E), (A, X)]),
            now=st.sampled_from([10.0, 60.0]),
        )
        def race(
            self, a: tuple[ApprovalState, ApprovalState], b: tuple[ApprovalState, ApprovalState], now: float
        ) -> None:
            async def both() -> list[bool]:
                return list(await asyncio.gather(self._move(*a, now), self._move(*b, now)))

            for move, won in zip((a, b), self.loop.run_until_complete(both()), strict=True):
                if won:
                    self.wins.append(move)

        @invariant()
        def each_state_is_reached_once_and_only_forward(self) -> None:
            row = self.loop.run_until_complete(self.store.get("a1"))
            assert row is not None
            path = [P] + [to for _, to in self.wins]
            assert row.state == path[-1]
            assert len(self.wins) <= 2 and len(set(path)) == len(path)
            if self.wins:
                assert self.wins[0][1] in (A, D, E)  # the one answer
                assert all(move == (A, X) for move in self.wins[1:])  # then only the run's claim

        def teardown(self) -> None:
            self.loop.run_until_complete(self.stack.aclose())
            self.loop.close()
            self.tmp.cleanup()

    return Answers


@pytest.mark.parametrize("backend", BACKENDS)
def test_answers_under_generated_interleavings(backend: str) -> None:
    cls = machine(backend)
    cls.TestCase.settings = settings(
        max_examples={"memory": 40, "sqlite": 15, "postgres": 6}[backend],
        stateful_step_count=6,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    cls.TestCase().runTest()

"""``UsageStore.reserve``: the background spend's admission, one conditional statement, so
that workers sharing a store never admit together more than the day's limit allows. A
hypothesis state machine drives two workers (two connections to one database) through
generated interleavings of reservations (some at once), charges and refunds, on every backend."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from hub.store import InMemoryUsageStore, UsageStore
from hub.store.sql import SqlUsageStore
from tests._support.backends import BACKENDS, drive, two_workers

LIMIT = 10.0
SCOPE = "background"
_days = itertools.count()

amounts = st.sampled_from([0.0, 0.5, 1.0, 2.5, 3.0, 4.0, 6.0, 10.0, 11.0])


class Spend(RuleBasedStateMachine):
    """The model: the day's total, which only a successful reservation, a charge or a refund moves."""

    loop: asyncio.AbstractEventLoop
    workers: tuple[UsageStore, UsageStore]

    @initialize()
    def fresh_day(self) -> None:
        self.day = f"2026-12-{next(_days):06d}"  # every example starts from an empty day
        self.total = 0.0
        self.held: list[float] = []

    def run(self, coro):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coro)

    @rule(worker=st.sampled_from([0, 1]), amount=amounts)
    def reserve(self, worker: int, amount: float) -> None:
        fits = self.total < LIMIT and self.total + amount <= LIMIT
        assert self.run(self.workers[worker].reserve(SCOPE, self.day, amount, LIMIT)) == fits
        if fits:
            self.total += amount
            self.held.append(amount)

    @rule(wanted=st.lists(amounts, min_size=2, max_size=4))
    def reserve_at_once(self, wanted: list[float]) -> None:
        """Both workers reserve at the same time: some serial order explains what was admitted."""
        stores = [self.workers[i % 2] for i in range(len(wanted))]

        async def together() -> list[bool]:
            return await asyncio.gather(
                *(s.reserve(SCOPE, self.day, a, LIMIT) for s, a in zip(stores, wanted, strict=True))
            )

        got = self.run(together())
        admitted = [a for a, ok in zip(wanted, got, strict=True) if ok]
        self.total += sum(admitted)
        self.held.extend(admitted)
        assert self.total <= LIMIT + 1e-9 or not admitted, "reservations admitted past the limit"
        for amount, ok in zip(wanted, got, strict=True):
            if not ok:  # refused: it would not have fitted after the others either
                assert self.total >= LIMIT or self.total + amount > LIMIT

    @rule(worker=st.sampled_from([0, 1]), amount=st.sampled_from([0.25, 1.0, 5.0]))
    def charge(self, worker: int, amount: float) -> None:
        """A step's cost past its run's hold: counted whatever the limit."""
        self.workers[worker].add_cost(SCOPE, self.day, amount)
        self.run(self.workers[worker].cost(SCOPE, self.day))  # written behind: committed within ms
        self.total += amount

    @rule(worker=st.sampled_from([0, 1]))
    def refund(self, worker: int) -> None:
        """A run ends: its hold is given back."""
        if self.held:
            amount = self.held.pop(0)
            self.workers[worker].add_cost(SCOPE, self.day, -amount)
            self.run(self.workers[worker].cost(SCOPE, self.day))
            self.total -= amount

    @invariant()
    def both_workers_see_the_model(self) -> None:
        if not hasattr(self, "day"):
            return
        for store in self.workers:
            assert self.run(store.cost(SCOPE, self.day)) == pytest.approx(self.total, abs=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reservations_never_admit_past_the_limit_across_workers(backend: str, tmp_path: Path) -> None:
    drive(Spend, two_workers(backend, tmp_path, SqlUsageStore, InMemoryUsageStore), max_examples=25, steps=20)

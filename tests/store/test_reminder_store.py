"""``ReminderStore``: the per-person cap and each fire's claim are one conditional statement,
so two workers (two connections to one database) never both win a fire nor pass the cap. A
hypothesis state machine drives them through generated interleavings of adds, claims (some
at once), finishes, cancels and forgets, on every backend."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from hub.store import InMemoryReminderStore, Reminder, ReminderStore
from hub.store.sql import SqlReminderStore
from tests._support.backends import BACKENDS, drive, two_workers

CAP = 3
_runs = itertools.count()
users = st.sampled_from(["ann", "bob"])


class Reminding(RuleBasedStateMachine):
    """The model: each reminder's due time, whether it repeats, and its pending fire."""

    loop: asyncio.AbstractEventLoop
    workers: tuple[ReminderStore, ReminderStore]

    @initialize()
    def fresh(self) -> None:
        self.prefix = f"x{next(_runs)}-"  # every example starts from reminders of its own users
        self.model: dict[str, tuple[str, float, bool, float | None, bool]] = {}  # user, due, repeats, pending, active
        self.ids = itertools.count()
        self.fires: list[tuple[str, float]] = []

    def run(self, coro):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coro)

    def active(self, user: str) -> int:
        return sum(1 for u, _, _, _, a in self.model.values() if u == user and a)

    @rule(worker=st.sampled_from([0, 1]), user=users, repeats=st.booleans())
    def add(self, worker: int, user: str, repeats: bool) -> None:
        rid = f"{self.prefix}{next(self.ids)}"
        r = Reminder(rid, "c:x", self.prefix + user, "t", due=100.0, cron="0 9 * * *" if repeats else "")
        fits = self.active(self.prefix + user) < CAP
        assert self.run(self.workers[worker].add(r, cap=CAP)) == fits
        if fits:
            self.model[rid] = (self.prefix + user, 100.0, repeats, None, True)

    @rule(user=users, n=st.integers(2, 4))
    def add_at_once(self, user: str, n: int) -> None:
        """Both workers add for one person together: the cap holds, and what fits gets in."""
        who = self.prefix + user
        rs = [Reminder(f"{self.prefix}{next(self.ids)}", "c:x", who, "t", due=100.0) for _ in range(n)]

        async def together() -> list[bool]:
            return await asyncio.gather(*(self.workers[i % 2].add(r, cap=CAP) for i, r in enumerate(rs)))

        room = CAP - self.active(who)
        got = self.run(together())
        assert sum(got) == min(room, n), (got, room)
        for r, ok in zip(rs, got, strict=True):
            if ok:
                self.model[r.id] = (who, 100.0, False, None, True)

    @rule(data=st.data())
    def claim_at_once(self, data: st.DataObject) -> None:
        """Both workers claim the same fire together: exactly one wins, unless one is pending."""
        if not self.model:
            return
        rid = data.draw(st.sampled_from(sorted(self.model)))
        user, due, repeats, pending, active = self.model[rid]
        following = due + 900 if repeats else None

        async def together() -> list[bool]:
            return await asyncio.gather(*(w.claim(rid, due, following) for w in self.workers))

        got = self.run(together())
        if active and pending is None:
            assert sorted(got) == [False, True], "a fire is claimed exactly once"
            self.fires.append((rid, due))
            self.model[rid] = (user, following if following is not None else due, repeats, due, following is not None)
        else:
            assert got == [False, False]

    @rule(worker=st.sampled_from([0, 1]), data=st.data())
    def finish(self, worker: int, data: st.DataObject) -> None:
        pending = sorted(k for k, v in self.model.items() if v[3] is not None)
        if not pending:
            return
        rid = data.draw(st.sampled_from(pending))
        user, due, repeats, fired, active = self.model[rid]
        assert fired is not None
        self.run(self.workers[worker].finish(rid, fired))
        self.run(self.workers[worker].finish(rid, fired))  # twice: the same
        if active:
            self.model[rid] = (user, due, repeats, None, active)
        else:
            del self.model[rid]

    @rule(worker=st.sampled_from([0, 1]), user=users, data=st.data())
    def cancel(self, worker: int, user: str, data: st.DataObject) -> None:
        if not self.model:
            return
        rid = data.draw(st.sampled_from(sorted(self.model)))
        mine = self.model[rid][0] == self.prefix + user
        assert self.run(self.workers[worker].cancel(rid, user=self.prefix + user)) == mine
        if mine:
            del self.model[rid]

    @invariant()
    def both_workers_see_the_model(self) -> None:
        if not hasattr(self, "model"):
            return
        for store in self.workers:
            for user in ("ann", "bob"):
                listed = self.run(store.waiting(user=self.prefix + user))
                want = sorted(k for k, v in self.model.items() if v[0] == self.prefix + user and v[4])
                assert sorted(r.id for r in listed) == want
                assert len(listed) <= CAP
            for rid, (_, due, _, pending, active) in self.model.items():
                got = self.run(store.get(rid))
                assert got is not None and (got.due, got.pending, got.active) == (due, pending, active)


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_fire_is_claimed_once_and_the_cap_holds_across_workers(backend: str, tmp_path: Path) -> None:
    drive(Reminding, two_workers(backend, tmp_path, SqlReminderStore, InMemoryReminderStore), max_examples=20, steps=20)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_due_lists_what_is_due_and_what_is_pending_and_forget_removes_a_person(
    backend: str, tmp_path: Path
) -> None:
    async with two_workers(backend, tmp_path, SqlReminderStore, InMemoryReminderStore) as (store, _):
        for i, due in enumerate([50.0, 150.0, 250.0]):
            assert await store.add(Reminder(f"r{i}", "c:x", "ann", "t", due=due), cap=0)
        assert await store.add(Reminder("b", "c:y", "bob", "t", due=10.0), cap=0)
        assert [r.id for r in await store.due(160.0)] == ["b", "r0", "r1"]
        assert await store.claim("r2", 250.0, None)
        assert [r.id for r in await store.due(160.0)] == ["b", "r0", "r1", "r2"]  # r2: pending
        assert await store.next_due() == 10.0
        assert await store.forget("ann") == 3
        assert [r.id for r in await store.waiting()] == ["b"]

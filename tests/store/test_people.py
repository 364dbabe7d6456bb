"""People: link codes (single use, expiring, bounded guessing, one outcome across workers),
/unlink and forgetting a person, on every backend, with a hypothesis state machine driving two
workers (two connections to one database) through link, unlink and forget interleavings."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from hub.store import LINK_ATTEMPTS, InMemoryStore, LinkError, MemoryStore, People
from hub.store.sql import SqlMemoryStore
from tests._support.backends import BACKENDS, drive, two_workers

_runs = itertools.count()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_code_joins_two_identities_once(backend: str, tmp_path: Path) -> None:
    async with two_workers(backend, tmp_path, SqlMemoryStore, InMemoryStore) as (one, two):
        a, b = People(one), People(two)
        code = await a.new_code("telegram", "42")
        joined = await b.redeem(code.lower(), "discord", "77")
        assert joined.identities == ("discord:77", "telegram:42")
        assert await a.person_of("discord", "77") == await a.person_of("telegram", "42")
        with pytest.raises(LinkError, match="used already"):  # a second use, by anyone: no link
            await a.redeem(code, "slack", "U1")
        assert await a.identities(joined.person) == ["discord:77", "telegram:42"]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_one_code_used_at_once_by_two_workers_links_one(backend: str, tmp_path: Path) -> None:
    async with two_workers(backend, tmp_path, SqlMemoryStore, InMemoryStore) as (one, two):
        a, b = People(one), People(two)
        code = await a.new_code("telegram", "42")
        got = await asyncio.gather(
            a.redeem(code, "discord", "77"), b.redeem(code, "slack", "U1"), return_exceptions=True
        )
        assert sum(not isinstance(g, BaseException) for g in got) == 1, got
        assert all(isinstance(g, LinkError) for g in got if isinstance(g, BaseException))
        person = await a.person_of("telegram", "42")
        assert len(await a.identities(person)) == 2


async def test_an_expired_code_links_nothing() -> None:
    clock = Clock()
    people = People(InMemoryStore(), clock=clock)
    code = await people.new_code("telegram", "42")
    clock.now += 601
    with pytest.raises(LinkError, match="expired"):
        await people.redeem(code, "discord", "77")
    assert await people.person_of("discord", "77") != await people.person_of("telegram", "42")


async def test_guessing_is_bounded_even_for_the_right_code() -> None:
    clock = Clock()
    people = People(InMemoryStore(), clock=clock)
    code = await people.new_code("telegram", "42")
    for _ in range(LINK_ATTEMPTS):
        with pytest.raises(LinkError, match="no link code"):
            await people.redeem("AAAAAAAA", "discord", "77")
    with pytest.raises(LinkError, match="too many"):
        await people.redeem(code, "discord", "77")
    assert len(await people.identities(await people.person_of("telegram", "42"))) == 1
    clock.now += 601  # the window passes; the code expired with it
    with pytest.raises(LinkError, match="expired"):
        await people.redeem(code, "discord", "77")


async def test_own_code_and_bad_identity_are_refused() -> None:
    people = People(InMemoryStore())
    code = await people.new_code("telegram", "42")
    with pytest.raises(LinkError, match="other account"):
        await people.redeem(code, "telegram", "42")
    with pytest.raises(LinkError, match="not an identity"):
        await people.redeem(code, "Tele gram", "4 2", operator=True)
    assert (await people.redeem(code, "discord", "77", operator=True)).identities == ("discord:77", "telegram:42")


async def test_linking_keeps_memory_and_unlink_leaves_it_with_the_others() -> None:
    people = People(InMemoryStore())
    tg = await people.person_of("telegram", "42")
    dc = await people.person_of("discord", "77")
    await people.remember(tg, "name", "Ann")
    await people.remember(dc, "likes", "tea")
    await people.redeem(await people.new_code("telegram", "42"), "discord", "77")
    assert await people.memory_of(tg) == {"name": "Ann", "likes": "tea"}
    fresh = await people.unlink("discord", "77")
    assert fresh is not None and fresh != tg
    assert await people.memory_of(fresh) == {}
    assert await people.memory_of(tg) == {"name": "Ann", "likes": "tea"}
    assert await people.unlink("discord", "77") is None


IDS = [("telegram", "1"), ("discord", "2"), ("slack", "3")]


class Linking(RuleBasedStateMachine):
    """The model: which identities are one person. Every identity is in exactly one person,
    a code links at most once, and a forgotten person's identities and memory are gone."""

    loop: asyncio.AbstractEventLoop
    workers: tuple[MemoryStore, MemoryStore]

    @initialize()
    def fresh(self) -> None:
        n = next(_runs)
        self.ids = [(p, f"{u}-{n}") for p, u in IDS]  # every example on identities of its own
        self.groups: dict[tuple[str, str], int] = {i: k for k, i in enumerate(self.ids)}
        self.codes: list[tuple[str, tuple[str, str]]] = []
        self.spent: set[str] = set()

    def run(self, coro):  # type: ignore[no-untyped-def]
        return self.loop.run_until_complete(coro)

    def people(self, worker: int) -> People:
        return People(self.workers[worker])

    @rule(worker=st.sampled_from([0, 1]), who=st.integers(0, 2))
    def ask(self, worker: int, who: int) -> None:
        ident = self.ids[who]
        self.codes.append((self.run(self.people(worker).new_code(*ident)), ident))

    @rule(data=st.data(), who=st.integers(0, 2), together=st.booleans())
    def redeem(self, data: st.DataObject, who: int, together: bool) -> None:
        if not self.codes:
            return
        code, owner = data.draw(st.sampled_from(self.codes))
        ident = self.ids[who]
        if together:  # both workers send it at once, from two identities
            other = self.ids[(who + 1) % 3]

            async def together() -> list[object]:
                return await asyncio.gather(
                    self.people(0).redeem(code, *ident), self.people(1).redeem(code, *other), return_exceptions=True
                )

            got = self.run(together())
            wins = [(i, g) for i, g in zip((ident, other), got, strict=True) if not isinstance(g, BaseException)]
            assert len(wins) <= 1
            if code in self.spent:
                assert not wins
            for i, _ in wins:
                self.spent.add(code)
                self.groups[i] = self.groups[owner]
            if not wins and code not in self.spent:
                assert owner in (ident, other)  # only the owner's own identity is refused
                for i, g in zip((ident, other), got, strict=True):
                    if i != owner:  # the other one lost to a race: nothing moved
                        assert isinstance(g, LinkError), g
            return
        try:
            self.run(self.people(0).redeem(code, *ident))
        except LinkError:
            assert code in self.spent or ident == owner
            return
        assert code not in self.spent
        self.spent.add(code)
        self.groups[ident] = self.groups[owner]

    @rule(worker=st.sampled_from([0, 1]), who=st.integers(0, 2))
    def unlink(self, worker: int, who: int) -> None:
        ident = self.ids[who]
        alone = sum(g == self.groups[ident] for g in self.groups.values()) == 1
        fresh = self.run(self.people(worker).unlink(*ident))
        assert (fresh is None) == alone
        if fresh is not None:
            self.groups[ident] = max(self.groups.values()) + 1

    @rule(who=st.integers(0, 2))
    def forget(self, who: int) -> None:
        people = self.people(1)
        person = self.run(people.person_of(*self.ids[who]))
        self.run(people.remember(person, "secret", "x"))
        gone = self.run(people.forget(person))
        group = self.groups[self.ids[who]]
        assert sorted(gone) == sorted(f"{p}:{u}" for p, u in self.ids if self.groups[(p, u)] == group)
        assert self.run(people.memory_of(person)) == {}
        for ident in self.ids:
            if self.groups[ident] == group:
                self.groups[ident] = max(self.groups.values()) + 1  # a new person when seen again

    @invariant()
    def the_store_agrees(self) -> None:
        if not hasattr(self, "ids"):
            return
        people = self.people(0)
        persons = {i: self.run(people.person_of(*i)) for i in self.ids}
        for i in self.ids:
            for j in self.ids:
                assert (persons[i] == persons[j]) == (self.groups[i] == self.groups[j]), (i, j)


@pytest.mark.parametrize("backend", BACKENDS)
def test_link_unlink_forget_interleavings_keep_one_person_per_identity(backend: str, tmp_path: Path) -> None:
    drive(Linking, two_workers(backend, tmp_path, SqlMemoryStore, InMemoryStore), max_examples=15, steps=15)
